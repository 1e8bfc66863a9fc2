/* A fork into a job cgroup made for it and removed after (mkdir, the child
 * writes cgroup.procs and exits, rmdir), against one into a cgroup kept
 * between forks (its cgroup.procs read after each, as the host checks it):
 * what keeping an ended job's cgroup saves a start.
 *
 *   cc -O2 -o /tmp/cgroup_fork benches/kernel/cgroup_fork.c
 *   mkdir /sys/fs/cgroup/unified/bench     # a cgroup2 directory of yours
 *   /tmp/cgroup_fork /sys/fs/cgroup/unified/bench 2000 0   # made and removed
 *   /tmp/cgroup_fork /sys/fs/cgroup/unified/bench 2000 1   # kept
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static double cpu_us(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 + r.ru_utime.tv_usec + r.ru_stime.tv_usec;
}

/* A child that moves itself into `dir` and exits. */
static void fork_into(const char *dir) {
  char procs[512];
  snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
  pid_t child = fork();
  if (child == 0) {
    int fd = open(procs, O_WRONLY);
    _exit(fd >= 0 && write(fd, "0", 1) == 1 ? 0 : 3);
  }
  int status;
  waitpid(child, &status, 0);
  if (status != 0) {
    fprintf(stderr, "the child could not join %s\n", dir);
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s CGROUP_DIR ROUNDS 0|1\n", argv[0]);
    return 2;
  }
  const char *root = argv[1];
  int rounds = atoi(argv[2]), kept = atoi(argv[3]);
  char dir[512], path[600], buf[256];
  snprintf(dir, sizeof dir, "%s/kept", root);
  if (kept && mkdir(dir, 0755) != 0) {
    perror(dir);
    return 1;
  }
  double t0 = now_us(), c0 = cpu_us();
  for (int i = 0; i < rounds; i++) {
    if (kept) {
      fork_into(dir);
      snprintf(path, sizeof path, "%s/cgroup.procs", dir);
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0 || read(fd, buf, sizeof buf) != 0) {
        fprintf(stderr, "not empty\n");
        return 1;
      }
      close(fd);
    } else {
      snprintf(path, sizeof path, "%s/job-%d", root, i);
      if (mkdir(path, 0755) != 0) {
        perror(path);
        return 1;
      }
      fork_into(path);
      if (rmdir(path) != 0) {
        perror(path);
        return 1;
      }
    }
  }
  double t1 = now_us(), c1 = cpu_us();
  if (kept)
    rmdir(dir);
  printf("%s: %.1f us a round, the parent's CPU %.1f us\n", kept ? "kept" : "made and removed",
         (t1 - t0) / rounds, (c1 - c0) / rounds);
  return 0;
}
