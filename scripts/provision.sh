# Everything the test suite needs on a Debian machine, installed when missing. Sourced by
# scripts/test (it exports PATH and cache variables for the tests); safe to run again: what is
# there is kept. As root or with passwordless sudo it installs Debian packages and starts a Docker
# daemon; without, it says once what it could not install and which tests that turns into
# failures under CI.
#
# Variables: VOLEE_TEST_CACHE (default ~/.cache/volee-test: harness programs, zellij, logs),
# VOLEE_HARNESS_CACHE (default $VOLEE_TEST_CACHE/harnesses), VOLEE_ZELLIJ_BIN (a zellij 0.45
# binary to use when none is on PATH), VOLEE_BUILD_ZELLIJ=1 (build zellij 0.45.1 with cargo when
# there is none: about 35 minutes; never under CI).

provision() {
  local cache="${VOLEE_TEST_CACHE:-${HOME}/.cache/volee-test}"
  mkdir -p "$cache"
  local -a missing=()

  # Root, passwordless sudo, or neither.
  local sudo=""
  local can_root=yes
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
      sudo="sudo -n"
    else
      can_root=no
    fi
  fi

  # Debian packages: command → package, and what goes without it.
  local -a need_apt=()
  local -a need_why=()
  want() { # want CHECK PACKAGE WHY
    if ! eval "$1" >/dev/null 2>&1; then
      need_apt+=("$2")
      need_why+=("$2: $3")
    fi
  }
  want 'command -v tmux' tmux "every end-to-end test (agents run in tmux panes)"
  want 'command -v script' bsdutils "the tests that give a command a terminal"
  want 'command -v git' git "the worktree and TPM tests"
  want 'command -v node' nodejs "the conformance tests of npm harnesses"
  want 'command -v npm' npm "installing the pinned harness programs"
  want "python3 -c 'import venv, ensurepip'" python3-venv "Aider's conformance test"
  want 'PATH="$PATH:/usr/sbin:/sbin" command -v dockerd' docker.io "the sandbox tests of volee's own agent"
  want "dpkg-query -W -f='\${Status}' busybox-static | grep -q 'install ok installed'" busybox-static "the sandbox image"
  want 'command -v dbus-daemon' dbus-daemon "the desktop notification test"
  want 'command -v dbus-monitor' dbus-bin "the desktop notification test"
  want 'command -v man' man-db "the man page test"
  want 'command -v ssh' openssh-client "volee machine (the system's ssh)"
  want 'PATH="$PATH:/usr/sbin:/sbin" command -v sshd' openssh-server "the remote machine tests (a real sshd on loopback, tests/e2e/machines.rs)"
  if [ "${#need_apt[@]}" -gt 0 ]; then
    if [ "$can_root" = yes ] && command -v apt-get >/dev/null 2>&1; then
      echo "provision: installing ${need_apt[*]}"
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_apt[@]}" >/dev/null
    else
      missing+=("${need_why[@]}")
    fi
  fi

  # The zellij plugin's target: rust-toolchain.toml names it, but rustup adds targets only when
  # it installs the toolchain itself.
  if command -v rustup >/dev/null 2>&1; then
    if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip1; then
      echo "provision: adding the wasm32-wasip1 target"
      rustup target add wasm32-wasip1 >/dev/null
    fi
  elif ! rustc --print target-list 2>/dev/null | grep -qx wasm32-wasip1; then
    missing+=("wasm32-wasip1 (no rustup): the zellij plugin's build, so scripts/test stops there")
  fi

  # Gemini CLI 0.61 needs node 20 or later; Debian 12's nodejs is 18 (Gemini's --version fails
  # there). An older node gets a node 20 beside it from the npm registry (the node-linux-ARCH
  # packages carry the official binaries), kept in the cache and first on PATH for the tests.
  provision_node "$cache" || missing+=("node 20 or later (this node is $(node --version 2>/dev/null)): the Gemini CLI conformance test")

  # The pinned harness programs of the conformance tests, each in
  # $VOLEE_HARNESS_CACHE/NAME-VERSION/ (the tests install a missing one themselves, slower).
  export VOLEE_HARNESS_CACHE="${VOLEE_HARNESS_CACHE:-$cache/harnesses}"
  mkdir -p "$VOLEE_HARNESS_CACHE/.version-home"
  if command -v npm >/dev/null 2>&1; then
    provision_harnesses || missing+=("some harness programs: their conformance tests install them, slower")
  else
    missing+=("the harness programs (no npm): the conformance tests")
  fi

  # A Docker daemon for the sandbox tests, started when none answers: no bridge and no iptables
  # rules (sandbox containers have no network), bounded wait, log in the cache.
  if PATH="$PATH:/usr/sbin:/sbin" command -v dockerd >/dev/null 2>&1 && ! docker info >/dev/null 2>&1; then
    if [ "$can_root" = yes ]; then
      echo "provision: starting dockerd (log: $cache/dockerd.log)"
      $sudo sh -c "nohup dockerd --iptables=false --ip6tables=false --bridge=none >>'$cache/dockerd.log' 2>&1 </dev/null &"
      local _
      for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
      if ! docker info >/dev/null 2>&1; then
        echo "provision: dockerd did not start within 60 s; the end of $cache/dockerd.log:" >&2
        tail -n 20 "$cache/dockerd.log" >&2 || true
        missing+=("a running Docker daemon: the sandbox tests")
      fi
    else
      missing+=("a running Docker daemon (start dockerd as root): the sandbox tests")
    fi
  fi

  # zellij 0.45 for the zellij tests: on PATH, else VOLEE_ZELLIJ_BIN (kept in the cache), else
  # built when asked. Never built under CI.
  if ! command -v zellij >/dev/null 2>&1; then
    mkdir -p "$cache/bin"
    if [ ! -x "$cache/bin/zellij" ] && [ -n "${VOLEE_ZELLIJ_BIN:-}" ] && [ -x "$VOLEE_ZELLIJ_BIN" ]; then
      cp "$VOLEE_ZELLIJ_BIN" "$cache/bin/zellij.partial" && mv "$cache/bin/zellij.partial" "$cache/bin/zellij"
    fi
    if [ ! -x "$cache/bin/zellij" ] && [ "${VOLEE_BUILD_ZELLIJ:-}" = 1 ] && [ -z "${CI:-}" ]; then
      echo "provision: building zellij 0.45.1 (about 35 minutes)"
      cargo install --locked --root "$cache/zellij-build" zellij@0.45.1 && cp "$cache/zellij-build/bin/zellij" "$cache/bin/zellij"
    fi
    if [ -x "$cache/bin/zellij" ]; then
      export PATH="$cache/bin:$PATH"
    else
      missing+=("zellij 0.45 (put it on PATH, set VOLEE_ZELLIJ_BIN, or VOLEE_BUILD_ZELLIJ=1): the zellij tests")
    fi
  fi

  if [ "${#missing[@]}" -gt 0 ]; then
    echo "provision: could not set up (packages need root or passwordless sudo):" >&2
    printf '  - %s\n' "${missing[@]}" >&2
    if [ -n "${CI:-}" ]; then
      echo "provision: CI is set, so the tests that need them fail instead of skipping" >&2
    else
      echo "provision: the tests that need them are skipped (they fail when CI is set)" >&2
    fi
  fi
  command -v tmux >/dev/null 2>&1 && tmux -V
  command -v zellij >/dev/null 2>&1 && zellij --version
  docker info >/dev/null 2>&1 && docker version --format 'docker {{.Server.Version}}' 2>/dev/null
  return 0
}

# node 20 or later first on PATH: the one there when it is new enough, else node-linux-ARCH@20
# from the npm registry into CACHE/node (installed once). False when neither is possible.
provision_node() {
  local cache="$1" major arch dir
  major=$(node --version 2>/dev/null | sed -n 's/^v\([0-9]*\)\..*/\1/p')
  [ -z "$major" ] && return 0 # no node at all: the nodejs package's line says what that costs
  [ "$major" -ge 20 ] && return 0
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64) arch=arm64 ;;
    *) return 1 ;;
  esac
  dir="$cache/node/node_modules/node-linux-$arch/bin"
  if [ ! -x "$dir/node" ]; then
    command -v npm >/dev/null 2>&1 || return 1
    echo "provision: node $(node --version) is older than 20: installing node-linux-$arch@20.20.2 into $cache/node"
    rm -rf "$cache/node.partial"
    npm install --prefix "$cache/node.partial" --no-audit --no-fund --no-save --loglevel=error "node-linux-$arch@20.20.2" </dev/null >/dev/null \
      && rm -rf "$cache/node" && mv "$cache/node.partial" "$cache/node" || { rm -rf "$cache/node.partial"; return 1; }
  fi
  "$dir/node" --version >/dev/null 2>&1 || return 1
  export PATH="$dir:$PATH"
}

# Install each pinned harness of tests/conformance/harnesses.txt that is not in the cache at its
# version. False when one could not be installed.
provision_harnesses() {
  local ok=0 name pkg version bin dir bindir have partial
  while read -r name pkg version bin; do
    case "$name" in ''|'#'*) continue ;; esac
    dir="$VOLEE_HARNESS_CACHE/$name-$version"
    bindir="$dir/node_modules/.bin"
    case "$pkg" in pypi:*) bindir="$dir/venv/bin" ;; esac
    # The version is any word of the first line: `2.1.332 (Claude Code)`, `grok 1.0.41 (…)`,
    # `GitHub Copilot CLI 1.0.102.` (a final dot dropped).
    # Standard output, else standard error (Pi prints its version there).
    have=$( { out=$(HOME="$VOLEE_HARNESS_CACHE/.version-home" "$bindir/$bin" --version 2>"$VOLEE_HARNESS_CACHE/.version-err" </dev/null || true)
              if [ -n "$out" ]; then printf '%s\n' "$out"; else cat "$VOLEE_HARNESS_CACHE/.version-err" 2>/dev/null; fi; } \
      | awk -v v="$version" 'NR==1{for(i=1;i<=NF;i++){w=$i; sub(/\.$/,"",w); if($i==v || w==v){print "yes"; exit}}}' || true)
    [ "$have" = "yes" ] && continue
    case "$pkg" in
      pypi:*)
        # A virtual environment is built in place (its scripts name their python by path).
        rm -rf "$dir"
        if python3 -m venv "$dir/venv" \
          && "$dir/venv/bin/pip" install -q --disable-pip-version-check "${pkg#pypi:}==$version" </dev/null >/dev/null; then
          echo "provision: installed ${pkg#pypi:}==$version"
        else
          rm -rf "$dir"; ok=1
        fi
        continue
        ;;
    esac
    partial="$VOLEE_HARNESS_CACHE/.$name-$version.partial-$$"
    rm -rf "$partial" "$dir"
    mkdir -p "$partial"
    # Grok's postinstall writes into $GROK_HOME (default ~/.grok): keep it in the cache.
    if GROK_HOME="$partial/.grok-home" npm install --prefix "$partial" --no-audit --no-fund --no-save --loglevel=error "$pkg@$version" </dev/null >/dev/null; then
      mv "$partial" "$dir"
      echo "provision: installed $pkg@$version"
    else
      rm -rf "$partial"; ok=1
    fi
  done < tests/conformance/harnesses.txt
  return "$ok"
}
