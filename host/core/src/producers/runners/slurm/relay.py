# The relay a Slurm job's batch script runs (any Python 3 on the node).
#
# It runs the job's command with bash in a session of its own, its stdout
# and stderr straight into the job's two output files (no copy: every byte
# the command writes is in the file at once), and:
# - passes TERM, INT, HUP, USR1, USR2 and QUIT it receives on to the whole
#   process group once (a signal sent to the batch shell alone reaches the
#   command's children too);
# - writes how the command ended, `exit N run R` or `signal N run R` (R:
#   Slurm's restart count, which a requeue raises), to the exit record
#   atomically (a temporary file renamed over it): Slurm's own exit code can
#   be wrong or gone, this record is the job's result;
# - ends the way the command ended.
import os
import signal
import sys

command = os.environ.pop("JOBS_HOST_COMMAND")
record = os.environ.pop("JOBS_HOST_EXIT_RECORD")
FORWARDED = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGQUIT]

# A record a run before a requeue left is not this run's.
try:
    os.unlink(record)
except FileNotFoundError:
    pass

# Blocked until the child is in its own group and the handlers are set, so
# that no signal falls between the two.
signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
child = os.fork()
if child == 0:
    os.setsid()
    # As a shell would start it: Python ignores these two for itself.
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    try:
        os.execvp("bash", ["bash", "-c", command])
    finally:
        os._exit(127)


def forward(sig, _frame):
    try:
        os.killpg(child, sig)
    except ProcessLookupError:
        # Not in its own group yet: the child itself, which holds the
        # signal blocked until it is.
        try:
            os.kill(child, sig)
        except OSError:
            pass
    except OSError:
        pass


for sig in FORWARDED:
    signal.signal(sig, forward)
signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)

while True:
    try:
        _, status = os.waitpid(child, 0)
        break
    except InterruptedError:
        continue
if os.WIFSIGNALED(status):
    ended = ("signal", os.WTERMSIG(status))
else:
    ended = ("exit", os.WEXITSTATUS(status))
temporary = f"{record}.{os.getpid()}.tmp"
try:
    with open(temporary, "w") as file:
        file.write(f"{ended[0]} {ended[1]} run {os.environ.get('SLURM_RESTART_COUNT') or 0}\n")
        file.flush()
        os.fsync(file.fileno())
    os.rename(temporary, record)
except OSError as error:
    # No record (a full disk, a quota): Slurm's own exit code stands in,
    # and this relay still ends as the command did.
    print(f"[jobs-host: the exit record {record} could not be written: {error}]", file=sys.stderr)
    try:
        os.unlink(temporary)
    except OSError:
        pass
if ended[0] == "signal":
    for sig in FORWARDED:
        signal.signal(sig, signal.SIG_DFL)
    if ended[1] != signal.SIGKILL:
        signal.signal(ended[1], signal.SIG_DFL)
    os.kill(os.getpid(), ended[1])
sys.exit(ended[1] & 0xFF)
