/* A fork and exec of /bin/true whose child writes itself into a cgroup
 * (mode 0), against clone3 with CLONE_INTO_CGROUP (mode 1, the cgroup's
 * directory opened for each fork, as the host does), against no cgroup at
 * all (mode 2).
 *
 *   cc -O2 -o /tmp/clone_into_cgroup benches/kernel/clone_into_cgroup.c
 *   mkdir /sys/fs/cgroup/unified/bench
 *   for m in 0 1 2; do /tmp/clone_into_cgroup /sys/fs/cgroup/unified/bench 2000 $m; done
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s CGROUP_DIR ROUNDS 0|1|2\n", argv[0]);
    return 2;
  }
  const char *cgroup = argv[1];
  int rounds = atoi(argv[2]), mode = atoi(argv[3]);
  char procs[512];
  snprintf(procs, sizeof procs, "%s/cgroup.procs", cgroup);
  char *argv_true[] = {"/bin/true", NULL}, *envp[] = {NULL};
  double t0 = now_us();
  for (int i = 0; i < rounds; i++) {
    pid_t child;
    if (mode == 1) {
      int dir = open(cgroup, O_PATH | O_DIRECTORY | O_CLOEXEC);
      struct clone_args args;
      memset(&args, 0, sizeof args);
      args.flags = CLONE_INTO_CGROUP;
      args.cgroup = dir;
      args.exit_signal = SIGCHLD;
      child = syscall(SYS_clone3, &args, sizeof args);
      if (child == 0) {
        execve(argv_true[0], argv_true, envp);
        _exit(127);
      }
      close(dir);
    } else {
      child = fork();
      if (child == 0) {
        if (mode == 0) {
          int fd = open(procs, O_WRONLY);
          if (fd < 0 || write(fd, "0", 1) != 1)
            _exit(126);
        }
        execve(argv_true[0], argv_true, envp);
        _exit(127);
      }
    }
    if (child < 0) {
      perror("clone");
      return 1;
    }
    int status;
    waitpid(child, &status, 0);
    if (status != 0) {
      fprintf(stderr, "the child failed: %d\n", status);
      return 1;
    }
  }
  printf("mode %d: %.1f us a spawn\n", mode, (now_us() - t0) / rounds);
  return 0;
}
