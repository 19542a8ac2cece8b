//! The screen model's cost: heap bytes one pane's model holds at 200×50 after a long busy
//! output (main and alternate screen both drawn), and how fast it takes output (MB/s), fed in
//! the chunks tmux's `%output` lines carry.
//!
//! `cargo bench -p volee-tmux --bench screen` (env: MB=50). Prints a markdown table for
//! docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// A counting global allocator is the one way to measure the heap a model holds.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use volee_tmux::screen::PaneScreen;

/// Counts the bytes live on the heap.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A deterministic stream like a busy agent's: coloured log lines, a TUI's cursor moves and
/// line clears, wide characters, now and then the alternate screen.
fn output(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 256);
    let mut n: u64 = 0x2545_f491_4f6c_dd1d;
    let mut i = 0u64;
    while out.len() < bytes {
        n ^= n << 13;
        n ^= n >> 7;
        n ^= n << 17;
        i += 1;
        match n % 7 {
            0 => out.extend_from_slice(
                format!(
                    "\x1b[{};1H\x1b[2K\x1b[38;5;{}m● step {i}\x1b[0m",
                    n % 50 + 1,
                    n % 256
                )
                .as_bytes(),
            ),
            1 if i % 500 == 0 => {
                out.extend_from_slice(b"\x1b[?1049h\x1b[H\x1b[2Jfull screen\x1b[?1049l")
            }
            2 => out.extend_from_slice("日本語のテキスト ✓ done\r\n".as_bytes()),
            _ => out.extend_from_slice(format!("line {i}: {:0>90}\r\n", n).as_bytes()),
        }
    }
    out
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let mb: usize = std::env::var("MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let data = output(mb << 20);
    let before = LIVE.load(Ordering::Relaxed);
    let mut screen = PaneScreen::new(50, 200);
    let empty = LIVE.load(Ordering::Relaxed) - before;
    let t = Instant::now();
    // tmux writes %output in chunks of at most a few KiB.
    for chunk in data.chunks(4096) {
        screen.feed(chunk);
    }
    let secs = t.elapsed().as_secs_f64();
    let held = LIVE.load(Ordering::Relaxed) - before;
    let t = Instant::now();
    let reads = 1000;
    let mut len = 0;
    for _ in 0..reads {
        len += screen.text().len();
    }
    let read_us = t.elapsed().as_secs_f64() * 1e6 / f64::from(reads);
    assert!(len > 0);
    println!("| screen model, 200×50, no scrollback | value |");
    println!("|---|---|");
    println!(
        "| heap held by a new model (KiB) | {:.0} |",
        empty as f64 / 1024.0
    );
    println!(
        "| heap held after {mb} MiB of busy output, main and alternate screens drawn (KiB) | {:.0} |",
        held as f64 / 1024.0
    );
    println!(
        "| output taken, 4 KiB chunks (MB/s) | {:.0} |",
        data.len() as f64 / secs / 1e6
    );
    println!("| one read of the screen's text (µs, {reads} reads) | {read_us:.1} |");
}
