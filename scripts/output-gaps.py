#!/usr/bin/env python3
"""The gaps between a program's writes, as tmux's control mode delivers them (`%output`).

Measures what the screen settle time (SCREEN_SETTLE_MS, docs/adr/0012-screen-model.md) must wait
out: a redraw written in several pieces must not be read half-drawn. Record while tests drive the
real harnesses, then report:

  scripts/output-gaps.py record OUT.jsonl SECONDS &   # attaches to every volee test tmux server
  cargo test -p volee-cli --test conformance codex_cli_asks
  scripts/output-gaps.py report OUT.jsonl...

The report bins the gaps between consecutive chunks of one pane, and for every gap of 40-250 ms
names the escape sequence the chunk before it ended with (a frame's end: the end of a
synchronized update `ESC[?2026l`, the cursor parked or shown, a title) .
"""
import collections, glob, json, os, re, subprocess, sys, threading, time

BINS = [(0, 5), (5, 10), (10, 20), (20, 40), (40, 100), (100, 250)]
END = re.compile(r"(\\033\[[0-9;?]*[A-Za-z]|\\033\][^\\]*\\007|\\007|\\015\\012|\\012)$")


def record(path, seconds):
    out = open(path, "w")
    lock = threading.Lock()

    def follow(sock):
        while os.path.exists(sock):
            p = subprocess.Popen(["tmux", "-u", "-S", sock, "-C", "attach", "-t", "main"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
            for line in p.stdout:
                t = time.monotonic()
                if line.startswith(b"%output "):
                    parts = line.rstrip(b"\n").split(b" ", 2)
                    data = parts[2] if len(parts) > 2 else b""
                    with lock:
                        out.write(json.dumps({"t": t, "sock": sock, "pane": parts[1].decode(),
                                              "data": data.decode("latin-1")}) + "\n")
                        out.flush()
            p.wait()
            time.sleep(0.2)

    seen = set()
    end = time.time() + seconds
    while time.time() < end:
        for sock in glob.glob("/tmp/volee-test-*/tmux/tmux-*/default"):
            if sock not in seen:
                seen.add(sock)
                threading.Thread(target=follow, args=(sock,), daemon=True).start()
        time.sleep(0.05)


def report(paths):
    for path in paths:
        rows = [json.loads(line) for line in open(path)]
        panes = collections.defaultdict(list)
        for r in rows:
            panes[(r["sock"], r["pane"])].append(r)
        bins, ends = collections.Counter(), collections.Counter()
        for chunks in panes.values():
            chunks.sort(key=lambda r: r["t"])
            for a, b in zip(chunks, chunks[1:]):
                gap = (b["t"] - a["t"]) * 1000
                for lo, hi in BINS:
                    if lo <= gap < hi:
                        bins[(lo, hi)] += 1
                if 40 <= gap < 250:
                    m = END.search(a["data"])
                    ends[m.group(1)[:12] if m else "text"] += 1
        print(f"{path}: {len(rows)} chunks")
        print("  gaps (ms): " + ", ".join(f"{lo}-{hi}: {bins[(lo, hi)]}" for lo, hi in BINS))
        print("  40-250 ms gaps after: " + ", ".join(f"{e} {n}" for e, n in ends.most_common(8)))


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "record":
        record(sys.argv[2], float(sys.argv[3]))
    elif len(sys.argv) >= 3 and sys.argv[1] == "report":
        report(sys.argv[2:])
    else:
        sys.exit(__doc__)
