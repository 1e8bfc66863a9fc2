# The relay a runner's job runs under on its engine's node (any Python 3).
#
# It runs the job's command with bash, as this host runs it, with stdout
# and stderr merged and stdin closed, and passes its output on:
# - as valid UTF-8 (each bad byte becomes U+FFFD, as a local read shows
#   it): an engine that reads the log as text ends its tail at the first
#   bad byte and loses the rest;
# - at once, a chunk as it comes, never a line later.
# A stop (SIGTERM or SIGINT from the engine) goes to the whole process
# group, what started after the engine's snapshot of the job's processes
# included; what is left after the grace is killed. When the command ends,
# whatever it left behind holding the output gets the grace to finish,
# then is killed too, and the relay ends with the command's own status.
import codecs
import os
import select
import signal
import subprocess
import sys
import time

os.environ.pop("JOBS_HOST_RELAY", None)
command = os.environ.pop("JOBS_HOST_COMMAND")
grace = float(os.environ.pop("JOBS_HOST_GRACE_S", "3"))
me = os.getpid()
group = os.getpgrp()
deadline = [None]
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)


def others(sig):
    # Every process of the group but this one.
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        pids = []
    for pid in pids:
        try:
            if pid != me and os.getpgid(pid) == group:
                os.kill(pid, sig)
        except OSError:
            pass


def stop(sig, _frame):
    if deadline[0] is None:
        deadline[0] = time.monotonic() + grace
        others(sig)


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGCHLD, lambda *_: None)
child = subprocess.Popen(
    ["bash", "-c", command],
    stdin=subprocess.DEVNULL,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
)
out = sys.stdout.buffer
decode = codecs.getincrementaldecoder("utf-8")("replace").decode
pipe = child.stdout.fileno()
killed = False
while True:
    if deadline[0] is None and child.poll() is not None:
        deadline[0] = time.monotonic() + grace
    timeout = None if deadline[0] is None else max(0.0, deadline[0] - time.monotonic())
    if timeout == 0.0 and not killed:
        others(signal.SIGKILL)
        killed = True
    ready, _, _ = select.select([pipe, wake_r], [], [], None if killed else timeout)
    if wake_r in ready:
        os.read(wake_r, 512)
    if pipe in ready:
        data = os.read(pipe, 65536)
        if not data:
            break
        out.write(decode(data).encode("utf-8"))
        out.flush()
out.write(decode(b"", True).encode("utf-8"))
out.flush()
status = child.wait()
if status < 0:
    # Ends as the command did, by its signal (SIGKILL has no handler to reset).
    if -status != signal.SIGKILL:
        signal.signal(-status, signal.SIG_DFL)
    os.kill(me, -status)
sys.exit(status)
