/* What a spawn costs as the spawning process holds more descriptors: the
 * child of clone(CLONE_VM | CLONE_VFORK) copies the descriptor table, and
 * its execve closes every close-on-exec entry again. N/2 pipes are opened
 * (a live job holds two descriptors), then /bin/true is spawned ROUNDS
 * times.
 *
 *   cc -O2 -o /tmp/spawn_fds benches/kernel/spawn_fds.c
 *   for n in 20 2000 10000 19000; do /tmp/spawn_fds $n 1000; done
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char stack[1 << 16] __attribute__((aligned(16)));

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int child(void *unused) {
  (void)unused;
  char *argv[] = {"/bin/true", NULL}, *envp[] = {NULL};
  execve(argv[0], argv, envp);
  _exit(127);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s DESCRIPTORS ROUNDS\n", argv[0]);
    return 2;
  }
  int descriptors = atoi(argv[1]), rounds = atoi(argv[2]);
  struct rlimit limit;
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  for (int i = 0; i < descriptors / 2; i++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      perror("pipe2");
      return 1;
    }
  }
  double t0 = now_us();
  for (int i = 0; i < rounds; i++) {
    pid_t pid = clone(child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
    if (pid < 0) {
      perror("clone");
      return 1;
    }
    int status;
    waitpid(pid, &status, 0);
  }
  printf("%d descriptors: %.1f us a spawn\n", descriptors, (now_us() - t0) / rounds);
  return 0;
}
