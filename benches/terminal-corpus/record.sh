#!/usr/bin/env bash
# Re-record the terminal corpus in this directory.
#
#   benches/terminal-corpus/record.sh [WORKDIR]
#
# Every session is a real program run on a pseudo-terminal by util-linux
# `script` (2.35+ for --log-out/--log-timing), 30 rows x 120 cols,
# TERM=xterm-256color. Output goes to NAME.raw (pty output bytes, with the
# "Script started/done" header and footer stripped) and NAME.timing (classic
# "delay bytes" lines, output only; the byte column sums to the .raw size).
# Interactive sessions get their input through a pipe with sleeps, so the
# program sits quiet at its prompt for >1 s before each answer arrives;
# `-E always` keeps the pty's echo on, so canonical-mode answers are echoed
# into the recording after the prompt.
#
# Local fixtures (wheels, git repos, a cargo workspace, an npm package, a
# venv ...) are built under WORKDIR (default: a fresh mktemp dir under /tmp).
# Nothing touches the network: wheels are served from 127.0.0.1 by
# `python3 -m http.server`, npm runs --offline, apt-get only simulates.
# HOME is pointed into WORKDIR so histories, caches and rc files of the real
# home directory are neither read nor written.
#
# Needs: script, python3 (with venv; ipython optional), git, gcc, cargo,
# npm, apt-get, vim, top, stty. Re-recordings are not byte-identical (timings,
# dates, top's process list ...). Run verify.py afterwards.
set -euo pipefail

OUT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=${1:-$(mktemp -d /tmp/corpus-work.XXXXXX)}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
ROWS=30
COLS=120
echo "recording into $OUT (fixtures in $WORK)" >&2

# ---------------------------------------------------------------- environment
PY_BASE=$(python3 -c 'import sys; print(sys.executable)')
IPY_OK=0
"$PY_BASE" -c 'import IPython' 2>/dev/null && IPY_OK=1
if command -v rustup >/dev/null 2>&1; then
  export RUSTUP_HOME=${RUSTUP_HOME:-$(rustup show home)}
fi
export HOME=$WORK/home
export CARGO_HOME=$WORK/cargo-home
export CARGO_TARGET_DIR=$WORK/target
export IPYTHONDIR=$HOME/.ipython
export GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME="Corpus Bot" GIT_AUTHOR_EMAIL="bot@example.invalid"
export GIT_COMMITTER_NAME="Corpus Bot" GIT_COMMITTER_EMAIL="bot@example.invalid"
for v in $(compgen -e | grep -E '^(PIP_|npm_config_|NPM_CONFIG_)' || true); do unset "$v"; done
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_CONFIG_FILE=/dev/null
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
export LANG=C.UTF-8
unset LC_ALL PYTHONSTARTUP
export SHELL=/bin/bash
mkdir -p "$HOME" "$CARGO_HOME" "$WORK/rec"

# ------------------------------------------------------------------- helpers
cat >"$WORK/strip.py" <<'EOF'
# strip util-linux script's header/footer from a --log-out file, keeping
# exactly the bytes the --log-timing file accounts for
import re, sys
raw_path, timing_path, out_raw, out_timing = sys.argv[1:5]
raw = open(raw_path, "rb").read()
lines = [l.split() for l in open(timing_path)]
assert all(len(l) == 2 for l in lines), "timing file is not classic 'delay bytes'"
total = sum(int(n) for _, n in lines)
start = 0
if raw.startswith(b"Script started on"):
    start = raw.index(b"\n") + 1
body, rest = raw[start:start + total], raw[start + total:]
assert len(body) == total, (len(body), total)
assert rest == b"" or re.match(rb"\n?Script done on [^\n]*\n?\Z", rest), rest[:200]
assert b"Script started on" not in body and b"Script done on" not in body
open(out_raw, "wb").write(body)
open(out_timing, "w").write("".join(f"{d} {n}\n" for d, n in lines))
EOF

cat >"$WORK/manifest.py" <<'EOF'
import json, sys
out, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
entries = []
for line in open(sys.argv[4]):
    name, inter, redraw, prompts, cmd = line.rstrip("\n").split("\t")
    entries.append({"name": name, "command": cmd, "interactive": inter == "1",
                    "redraws": redraw == "1", "prompts": json.loads(prompts),
                    "rows": rows, "cols": cols})
json.dump(entries, open(out, "w"), indent=2, ensure_ascii=False)
open(out, "a").write("\n")
EOF
: >"$WORK/manifest.tsv"

# feed DELAY TEXT DELAY TEXT ... DELAY  -- TEXT goes through printf %b
feed() {
  while [ $# -gt 0 ]; do
    sleep "$1"; shift
    if [ $# -gt 0 ]; then printf '%b' "$1"; shift; fi
  done
}

# rec NAME INTERACTIVE(0|1) REDRAWS(0|1) PROMPTS_JSON DESCRIPTION DIR CMD [FEED ARGS...]
rec() {
  local name=$1 inter=$2 redraw=$3 prompts=$4 desc=$5 dir=$6 cmd=$7
  shift 7
  local pre="stty rows $ROWS cols $COLS; export TERM=xterm-256color PAGER=cat GIT_PAGER=cat; cd $(printf %q "$dir") || exit 1; "
  local r=$WORK/rec/$name
  echo "  - $name" >&2
  rm -f "$r.raw" "$r.timing"
  if [ $# -gt 0 ]; then
    feed "$@" | script -q -E always -o 2M --log-out "$r.raw" --log-timing "$r.timing" -c "$pre$cmd" >/dev/null || true
  else
    script -q -E always -o 2M --log-out "$r.raw" --log-timing "$r.timing" -c "$pre$cmd" </dev/null >/dev/null || true
  fi
  "$PY_BASE" "$WORK/strip.py" "$r.raw" "$r.timing" "$OUT/$name.raw" "$OUT/$name.timing"
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$inter" "$redraw" "$prompts" "$desc" >>"$WORK/manifest.tsv"
}

# ------------------------------------------------------------------ fixtures
echo "building fixtures" >&2
F=$WORK/fx
rm -rf "$F"; mkdir -p "$F"

# python venv (pip 23-ish from ensurepip; no network) + small helper scripts
"$PY_BASE" -m venv "$WORK/venv"
export PATH="$WORK/venv/bin:$PATH"
if [ "$IPY_OK" = 1 ]; then
  printf '#!/bin/sh\nexec %q -m IPython "$@"\n' "$PY_BASE" >"$WORK/venv/bin/ipython"
  chmod +x "$WORK/venv/bin/ipython"
fi

# hand-built wheels (setuptools without the `wheel` package cannot build them
# offline); bigdata carries 6 MB of random bytes so pip draws a progress bar
mkdir -p "$F/wheels"
cat >"$F/mkwheels.py" <<'EOF'
import base64, hashlib, random, sys, zipfile
out = sys.argv[1]
def wheel(name, version, files, requires=()):
    di = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: corpus fixture {name}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = dict(files)
    files[f"{di}/METADATA"] = meta.encode()
    files[f"{di}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: corpus-mkwheels\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, data in files.items():
        h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={h},{len(data)}")
    record.append(f"{di}/RECORD,,")
    files[f"{di}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(f"{out}/{name}-{version}-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
wheel("tinyalpha", "0.1.0", {"tinyalpha/__init__.py": b"def hello():\n    return 'alpha'\n"})
wheel("tinybeta", "0.2.0", {"tinybeta/__init__.py": b"from tinyalpha import hello\n"}, ["tinyalpha>=0.1"])
wheel("tinygamma", "0.3.0", {"tinygamma/__init__.py": b"VALUE = 3\n", "tinygamma/util.py": b"def twice(x):\n    return 2 * x\n"})
blob = random.Random(1234).randbytes(6 * 1024 * 1024)
wheel("bigdata", "1.0.0", {"bigdata/__init__.py": b"import os\nBLOB = os.path.join(os.path.dirname(__file__), 'blob.bin')\n", "bigdata/blob.bin": blob}, ["tinygamma"])
EOF
"$PY_BASE" "$F/mkwheels.py" "$F/wheels"
PORT=$("$PY_BASE" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# a static file server on 127.0.0.1 that sends at ~3 MB/s, so the bars have time to redraw
cat >"$F/serve.py" <<'EOF'
import functools, http.server, sys, time
class Slow(http.server.SimpleHTTPRequestHandler):
    def copyfile(self, src, dst):
        while True:
            buf = src.read(32 * 1024)
            if not buf:
                break
            dst.write(buf)
            time.sleep(0.01)
handler = functools.partial(Slow, directory=sys.argv[2])
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
EOF
"$PY_BASE" "$F/serve.py" "$PORT" "$F/wheels" >"$WORK/http.log" 2>&1 &
HTTP_PID=$!
trap 'kill "$HTTP_PID" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  "$PY_BASE" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$PORT/')" 2>/dev/null && break
  sleep 0.1
done
IDX=http://127.0.0.1:$PORT/
# something to uninstall later
pip install -q --no-index --find-links "$F/wheels" tinybeta

# big git repo: 3000 commits, 3000 files, via fast-import
mkdir -p "$F/bigrepo"
git -C "$F/bigrepo" init -q -b main
"$PY_BASE" - "$F/bigrepo" <<'EOF' | git -C "$F/bigrepo" fast-import --quiet
import random, sys
rnd = random.Random(7)
out = sys.stdout.buffer
t = 1700000000
for i in range(3000):
    body = ("".join(f"line {j} of file {i}: {rnd.getrandbits(64):016x}\n" for j in range(20))).encode()
    msg = f"add module {i}\n".encode()
    out.write(b"commit refs/heads/main\n")
    out.write(f"committer Corpus Bot <bot@example.invalid> {t + 60 * i} +0000\n".encode())
    out.write(b"data %d\n%s" % (len(msg), msg))
    out.write(f"M 644 inline src/mod{i // 100:02d}/file{i:04d}.txt\n".encode())
    out.write(b"data %d\n%s\n" % (len(body), body))
EOF
git -C "$F/bigrepo" reset -q --hard

# small repo with branches and merges (git log --graph, rebase -i, add -p)
G=$F/graphrepo
mkdir -p "$G"; cd "$G"
git init -q -b main
export GIT_AUTHOR_DATE="2024-01-01T10:00:00Z" GIT_COMMITTER_DATE="2024-01-01T10:00:00Z"
n=0
commit() { n=$((n + 1)); mkdir -p "$(dirname "$1")"; echo "$2 $n" >>"$1"; git add "$1"; git commit -q -m "$3"; }
commit README.md "readme" "Initial commit"
commit src/main.c "int main(void) { return 0; }" "Add main.c"
for br in parser lexer docs; do
  git checkout -q -b "feature/$br"
  for k in 1 2 3; do commit "src/$br.c" "/* $br step $k */" "$br: step $k"; done
  git checkout -q main
  commit CHANGELOG "main work before $br merge" "Update changelog for $br"
  git merge -q --no-ff -m "Merge branch 'feature/$br'" "feature/$br"
done
git tag v0.1.0
for k in 1 2 3 4; do commit "notes/n$k.txt" "note $k" "Add note $k"; done
unset GIT_AUTHOR_DATE GIT_COMMITTER_DATE
cd "$WORK"

# cargo workspace: 4 path crates, no external deps
W=$F/ws
mkdir -p "$W"
cat >"$W/Cargo.toml" <<'EOF'
[workspace]
resolver = "2"
members = ["core", "util", "parse", "app"]
EOF
mkcrate() { # name deps...
  local c=$1; shift
  mkdir -p "$W/$c/src"
  { echo "[package]"; echo "name = \"$c\""; echo 'version = "0.1.0"'; echo 'edition = "2021"'
    echo; echo "[dependencies]"; for d in "$@"; do echo "$d = { path = \"../$d\" }"; done; } >"$W/$c/Cargo.toml"
}
mkcrate core; mkcrate util core; mkcrate parse core util; mkcrate app core util parse
"$PY_BASE" - "$W" <<'EOF'
import sys
w = sys.argv[1]
def gen(n, prefix):
    return "".join(
        f"pub fn {prefix}_{i}(x: u64) -> u64 {{ let v: Vec<u64> = (0..x % 7 + {i % 5}).map(|k| k * {i} + x).collect(); v.iter().sum::<u64>() ^ {i} }}\n"
        for i in range(n))
open(f"{w}/core/src/lib.rs", "w").write(gen(400, "core"))
open(f"{w}/util/src/lib.rs", "w").write("pub use core as c;\n" + gen(300, "util") + "pub fn helper(x: u64) -> u64 { c::core_1(x) + util_2(x) }\n")
open(f"{w}/parse/src/lib.rs", "w").write(gen(300, "parse") + "pub fn run(x: u64) -> u64 { util::helper(x) + core::core_3(x) + parse_4(x) }\n")
open(f"{w}/app/src/main.rs", "w").write("fn main() {\n    let mut unused = 1;\n    println!(\"{}\", parse::run(std::env::args().count() as u64));\n}\n")
EOF

# npm: a local package packed to a tarball, and a project depending on it + a folder dep
N=$F/npm
mkdir -p "$N/leftpad-local" "$N/strutil-local" "$N/app" "$N/initdemo"
cat >"$N/leftpad-local/package.json" <<'EOF'
{ "name": "leftpad-local", "version": "1.0.0", "main": "index.js", "license": "MIT" }
EOF
echo 'module.exports = (s, n, c = " ") => String(s).padStart(n, c);' >"$N/leftpad-local/index.js"
cat >"$N/strutil-local/package.json" <<'EOF'
{ "name": "strutil-local", "version": "0.3.1", "main": "index.js", "license": "MIT" }
EOF
echo 'exports.shout = (s) => String(s).toUpperCase() + "!";' >"$N/strutil-local/index.js"
(cd "$N/leftpad-local" && npm pack --silent --pack-destination "$N" >/dev/null)
cat >"$N/app/package.json" <<'EOF'
{
  "name": "corpus-app",
  "version": "1.0.0",
  "private": true,
  "dependencies": {
    "leftpad-local": "file:../leftpad-local-1.0.0.tgz",
    "strutil-local": "file:../strutil-local"
  }
}
EOF

# text fixtures, C file, python scripts
P=$F/py
mkdir -p "$P" "$F/logs" "$F/c" "$F/rm"
cat >"$F/logs/build.log" <<'EOF'
[12:00:01] info: configuring project corpus-demo
[12:00:01] info: found compiler gcc 12
[12:00:02] warning: option -O4 is deprecated, using -O3
[12:00:02] info: compiling src/main.c
[12:00:03] error: src/parser.c:41: expected ';' before '}' token
[12:00:03] info: compiling src/lexer.c
[12:00:03] warning: src/lexer.c:17: unused variable 'tmp'
[12:00:04] info: linking corpus-demo
[12:00:04] error: undefined reference to `parse_expr'
[12:00:04] info: 2 errors, 2 warnings generated
[12:00:05] Warning: build finished with errors
EOF
cat >"$F/c/diag.c" <<'EOF'
#include <stdio.h>

static int scale(int x) {
    unsigned int factor = 3;
    int unused;
    return x * factor;
}

int main(void) {
    int total = scale(14);
    printf("%d\n", total);
    return totl;
}
EOF
cat >"$P/tqdm_bar.py" <<'EOF'
# tqdm-style single progress bar, 500 updates with \r
import sys, time
total, width = 500, 40
blocks = " ▏▎▍▌▋▊▉"
t0 = time.time()
for i in range(total + 1):
    frac = i / total
    full, part = divmod(int(frac * width * 8), 8)
    bar = "█" * full + (blocks[part] if full < width else "") 
    bar = bar.ljust(width)
    el = time.time() - t0
    rate = i / el if el > 0 else 0.0
    eta = (total - i) / rate if rate else 0.0
    sys.stdout.write(f"\rprocessing: {frac * 100:3.0f}%|{bar}| {i}/{total} "
                     f"[{int(el) // 60:02d}:{int(el) % 60:02d}<{int(eta) // 60:02d}:{int(eta) % 60:02d}, {rate:6.2f}it/s]")
    sys.stdout.flush()
    time.sleep(0.004)
sys.stdout.write("\n")
EOF
cat >"$P/multibar.py" <<'EOF'
# docker-pull-like multi-line progress: 3 bars redrawn with ESC[A cursor-up
import sys, time
layers = [("3f4ca61aafcd", 31.4), ("a1f9e2b7c0d4", 12.8), ("77be01c4e5a2", 48.9)]
speed = [1.9, 0.7, 2.6]
done = [0.0, 0.0, 0.0]
w = sys.stdout.write
for lid, _ in layers:
    w(f"{lid}: Waiting\n")
frame = 0
while True:
    frame += 1
    w("\x1b[%dA" % len(layers))
    for k, (lid, size) in enumerate(layers):
        done[k] = min(size, done[k] + speed[k] * (0.5 + (frame * (k + 3)) % 7 / 6))
        if done[k] >= size:
            line = f"{lid}: Pull complete"
        else:
            n = int(50 * done[k] / size)
            line = f"{lid}: Downloading [{'=' * n}>{' ' * (49 - n)}]  {done[k]:.1f}MB/{size}MB"
        w("\x1b[2K" + line + "\n")
    sys.stdout.flush()
    if all(d >= s for d, (_, s) in zip(done, layers)):
        break
    time.sleep(0.03)
w("Digest: sha256:4d2a1c3e9b0f5a6d7e8c9b0a1f2e3d4c5b6a7980f1e2d3c4b5a69788f0e1d2c3\n")
w("Status: Downloaded newer image for corpus/demo:latest\n")
EOF
cat >"$P/spinner.py" <<'EOF'
# build step with a braille spinner redrawn with \r, then a final "done"
import sys, time
frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
steps = ["resolving dependencies", "compiling assets", "bundling", "minifying", "writing output"]
i = 0
for s, step in enumerate(steps, 1):
    for _ in range(24):
        sys.stdout.write(f"\r{frames[i % len(frames)]} [{s}/{len(steps)}] {step}...")
        sys.stdout.flush()
        i += 1
        time.sleep(0.04)
    sys.stdout.write("\r\x1b[2K")
    print(f"✔ [{s}/{len(steps)}] {step}")
print("done")
EOF
cat >"$P/longline.py" <<'EOF'
# a build log whose compiler command lines wrap past 120 columns
import time
srcs = ["src/main.c", "src/parser.c", "src/lexer.c", "src/codegen/emit_x86_64.c"]
flags = ("-std=c11 -O2 -g -Wall -Wextra -Wpedantic -Wshadow -Wconversion -fno-omit-frame-pointer "
         "-fstack-protector-strong -D_FORTIFY_SOURCE=2 -DCORPUS_VERSION=\\\"1.4.2\\\" "
         "-Iinclude -Ithird_party/include -Ibuild/generated -isystem /usr/local/include")
for s in srcs:
    print(f"[build] cc {flags} -MMD -MP -MF build/obj/{s}.d -c {s} -o build/obj/{s}.o", flush=True)
    time.sleep(0.15)
print("[build] cc -o build/corpus-demo " + " ".join(f"build/obj/{s}.o" for s in srcs) +
      " -Lbuild/lib -Wl,--as-needed -Wl,-z,relro,-z,now -lm -lpthread -ldl", flush=True)
print("[build] " + "=" * 300)
print("[build] finished: 5 targets, 0 warnings")
EOF
cat >"$P/yesno.py" <<'EOF'
print("The authenticity of host 'build-01.example.invalid (192.0.2.10)' can't be established.")
print("ED25519 key fingerprint is SHA256:pV3qj0v2mZ5cQ8gXH1ZrQe0dKx7nYc2o8b9TzWfL4sA.")
print("This key is not known by any other names.")
ans = input("Are you sure you want to continue connecting (yes/no)? ")
if ans.strip() == "yes":
    print("Warning: Permanently added 'build-01.example.invalid' (ED25519) to the list of known hosts.")
else:
    print("Host key verification failed.")
EOF
cat >"$P/password.py" <<'EOF'
import getpass
pw = getpass.getpass("Password: ")
print(f"authenticated ({len(pw)} characters read)")
EOF
cat >"$P/name.py" <<'EOF'
name = input("Enter your name: ")
print(f"Hello, {name}!")
EOF
cat >"$P/pdbtarget.py" <<'EOF'
def mean(xs):
    total = sum(xs)
    return total / len(xs)

data = [3, 5, 8, 13]
m = mean(data)
print("mean:", m)
EOF
cat >"$F/confirm.sh" <<'EOF'
#!/bin/bash
echo "This will delete 3 build artifacts in ./out"
read -r -p "Continue? [Y/n] " a
case "$a" in [Yy]*|"") echo "removing out/a.o out/b.o out/c.o"; echo "ok";; *) echo "aborted";; esac
EOF
chmod +x "$F/confirm.sh"

# ---------------------------------------------------------------- recording
echo "recording sessions" >&2
rm -f "$OUT"/*.raw "$OUT"/*.timing
rm -rf "$WORK/x" "$WORK/x2" "$WORK/dl" "$F/clone1"

# 1. pip with progress bars (wheels served from 127.0.0.1)
rec pip_download_progress 0 1 '[]' "pip download --no-index --find-links $IDX bigdata -d /tmp/.../dl --progress-bar on" \
  "$WORK" "pip download --no-index --find-links $IDX bigdata -d $WORK/dl --progress-bar on"
rec pip_install_target_progress 0 1 '[]' "pip install --no-index --find-links $IDX tinybeta bigdata --target /tmp/.../x --progress-bar on" \
  "$WORK" "pip install --no-index --find-links $IDX tinybeta bigdata --target $WORK/x --progress-bar on"
rec pip_install_local_dir 0 0 '[]' "pip install --no-index --find-links <local wheel dir> tinybeta tinygamma --target /tmp/.../x2" \
  "$WORK" "pip install --no-index --find-links $F/wheels tinybeta tinygamma --target $WORK/x2"
# 2. git clone progress over the pack protocol
rec git_clone_progress 0 1 '[]' "git clone --progress file:///tmp/.../bigrepo clone1 (3000 commits, 3000 files)" \
  "$F" "git clone --progress file://$F/bigrepo clone1"
# 3. python progress bars
rec tqdm_style_bar 0 1 '[]' "python3 tqdm_bar.py (500 \\r updates)" "$P" "python3 tqdm_bar.py"
rec multiline_cursor_up_bars 0 1 '[]' "python3 multibar.py (3 bars redrawn with ESC[A)" "$P" "python3 multibar.py"
# 4. cargo build with progress bar
rm -rf "$CARGO_TARGET_DIR"
rec cargo_build_workspace 0 1 '[]' "cargo build --color always -j 1 (4 path crates, CARGO_TARGET_DIR=/tmp/.../target)" \
  "$W" "cargo build --color always -j 1"
# 5. apt-get simulations
rec apt_get_install_sim 0 0 '[]' "apt-get -s install cowsay fortune-mod sl htop tree" "$WORK" "apt-get -s install cowsay fortune-mod sl htop tree"
rec apt_get_upgrade_sim 0 0 '[]' "apt-get -s upgrade" "$WORK" "apt-get -s upgrade"
# 6. npm install of a local tarball + local folder, offline
rec npm_install_offline 0 0 '[]' "npm install --offline (file: tarball + file: folder deps)" "$N/app" "npm install --offline"
# 7. plain coloured output
# top is limited (-p) to processes of this session, so the machine's other processes stay out
rec top_batch 0 0 '[]' "top -b -n 3 -d 0.2 -w 120 -p <this shell, a sleep, a busy python3>" "$WORK" \
  "sleep 10 & s=\$!; python3 -c 'import time
t = time.time()
while time.time() - t < 1.0: pass' & p=\$!; top -b -n 3 -d 0.2 -w 120 -p \$\$,\$s,\$p; kill \$s \$p 2>/dev/null; wait"
rec ls_color_usr_bin 0 0 '[]' "ls --color=always -la /usr/bin | head -200" "$WORK" "ls --color=always -la /usr/bin | head -200"
rec git_log_graph 0 0 '[]' "git log --color=always --graph --decorate" "$G" "git log --color=always --graph --decorate"
rec grep_color 0 0 '[]' "grep --color=always -n -i -E 'error|warning' build.log" "$F/logs" "grep --color=always -n -i -E 'error|warning' build.log"
# 8. compiler diagnostics and a traceback
rec gcc_diagnostics 0 0 '[]' "gcc -fdiagnostics-color=always -Wall -Wextra -Wconversion -c diag.c" "$F/c" \
  "gcc -fdiagnostics-color=always -Wall -Wextra -Wconversion -c diag.c -o /dev/null"
rec python_traceback 0 0 '[]' "python3 -c '...' (nested calls ending in ZeroDivisionError)" "$P" \
  "python3 -c 'def ratio(a, b):
    return a / b

def report(rows):
    return [ratio(x, y) for x, y in rows]

print(\"computing ratios\")
report([(1, 2), (3, 0)])'"
# 9. spinner and long wrapped lines
rec spinner_build 0 1 '[]' "python3 spinner.py (braille spinner with \\r, then done)" "$P" "python3 spinner.py"
rec long_line_wrap 0 0 '[]' "python3 longline.py (build log lines longer than 120 columns)" "$P" "python3 longline.py"

# interactive ones
rec read_continue_yn 1 0 '["Continue? [Y/n]"]' \
  "bash confirm.sh (read -r -p 'Continue? [Y/n] ' a), answered y" "$F" "bash confirm.sh" 1.5 'y\n' 1
rec ssh_style_yes_no 1 0 '["Are you sure you want to continue connecting (yes/no)?"]' \
  "python3 yesno.py (input('Are you sure you want to continue connecting (yes/no)? ')), answered yes" "$P" "python3 yesno.py" 1.5 'yes\n' 1
rec getpass_password 1 0 '["Password:"]' "python3 password.py (getpass.getpass('Password: ')), answered" "$P" "python3 password.py" 1.5 'not-a-real-password\n' 1
rec python_repl 1 0 '[">>>", ">>>", "...", "...", ">>>"]' \
  "python3 -q; 1+1; for i in range(3): / print(i) / blank; exit()" "$P" "python3 -q" \
  1.5 '1+1\r' 1.5 'for i in range(3):\r' 1.5 '    print(i)\r' 1.5 '\r' 1.5 'exit()\r' 1
rec bash_interactive 1 0 '["$", "$", "$"]' "PS1='\$ ' bash --norc --noprofile -i; echo hello; ls; exit" "$F/logs" \
  "PS1='\$ ' bash --norc --noprofile -i" 1.5 'echo hello from bash\r' 1.5 'ls -l\r' 1.5 'exit\r' 1
rec git_rebase_i_vim 1 0 '["", ""]' "GIT_EDITOR='vim --clean' git rebase -i HEAD~3; keys ddp, then :wq" "$G" \
  "GIT_EDITOR='vim --clean' git rebase -i HEAD~3" 2 'ddp' 1.5 ':wq\r' 1.5
rec pip_uninstall_proceed 1 0 '["Proceed (Y/n)?"]' "pip uninstall tinyalpha (venv under /tmp), answered y" "$WORK" \
  "pip uninstall tinyalpha" 2 'y\n' 1
rec input_name 1 0 '["Enter your name:"]' "python3 name.py (input('Enter your name: ')), answered Ada" "$P" "python3 name.py" 1.5 'Ada\n' 1
touch "$F/rm/old-report.txt"
rec rm_interactive 1 0 "[\"rm: remove regular empty file 'old-report.txt'?\"]" "rm -i old-report.txt, answered y" "$F/rm" \
  "rm -i old-report.txt; ls -la" 1.5 'y\n' 1
# an unstaged change for git add -p
printf 'int main(void) {\n    puts("hello");\n    return 0;\n}\n' >"$G/src/main.c"
rec git_add_patch 1 0 '["(1/1) Stage this hunk [y,n,q,a,d,e,p,?]?"]' "git add -p, answered y" "$G" \
  "git add -p; git status --short" 1.5 'y\n' 1
rec pdb_session 1 0 '["(Pdb)", "(Pdb)", "(Pdb)", "(Pdb)", "(Pdb)"]' "python3 -m pdb pdbtarget.py; n, n, p data, c, q" "$P" \
  "python3 -m pdb pdbtarget.py" 1.5 'n\n' 1.5 'n\n' 1.5 'p data\n' 1.5 'c\n' 1.5 'q\n' 1
rec npm_init_prompts 1 0 '["package name: (initdemo)", "version: (1.0.0)", "description:", "entry point: (index.js)", "test command:", "git repository:", "keywords:", "author:", "license: (ISC)", "type: (commonjs)", "Is this OK? (yes)"]' \
  "npm init (accepting defaults, description filled in)" "$N/initdemo" "npm init" \
  1.5 '\n' 1.2 '\n' 1.2 'corpus demo package\n' 1.2 '\n' 1.2 '\n' 1.2 '\n' 1.2 '\n' 1.2 '\n' 1.2 '\n' 1.2 '\n' 1.2 'yes\n' 1
if [ "$IPY_OK" = 1 ]; then
  rec ipython_simple_prompt 1 0 '["In [1]:", "In [2]:", "   ...:", "   ...:", "In [3]:"]' \
    "ipython --simple-prompt; 1+1; def f(x): / return x*2 / blank; exit" "$P" "ipython --simple-prompt" \
    2.5 '1+1\n' 1.5 'def f(x):\n' 1.5 '    return x * 2\n' 1.5 '\n' 1.5 'exit\n' 1
fi

"$PY_BASE" "$WORK/manifest.py" "$OUT/manifest.json" "$ROWS" "$COLS" "$WORK/manifest.tsv"
"$PY_BASE" "$OUT/verify.py"
du -sh "$OUT" >&2
