/*
 * fleet-shim: the process driver's native launcher, container shim and pod holder (see
 * src/box/NativeShim.ts and src/box/Launcher.ts).
 *
 * It does what the box's sh launcher and the sh chain of src/box/Shim.ts do (same files, same
 * answers, same exit codes) without starting a shell per step: on the VMs Fleet runs on, a
 * program start costs about a millisecond, most of it in the C library's start-up (its CPU feature
 * probes trap to the hypervisor), and a fork of a shell a little more. So this program has no C
 * library at all (raw system calls, no stdio, memory from mmap only), and starts in about 0.1 ms.
 * It is built by the box with the machine's C compiler (freestanding, static). What it starts, it
 * starts with spawn() below, which on x86_64 copies no page table (a fork's cost here).
 *
 *   fleet-shim launcher SH
 *     Resident, the box's child, reading "TOKEN ARG FILE" lines on stdin. Each launch is a child
 *     of it, which it reaps when it ends (after the launcher, the host's init does), with stdin
 *     and stderr on /dev/null and stdout the pipe to the box; by FILE's first bytes, one of:
 *     - a container's shim (FILE: MAGIC, "shim", the environment's entries, "", then DIR
 *       [-m CGROUP_DIR | -l FILE VALUE]... [-c CGROUP_PROCS]... [-t HOLDER_PID [-n]] [-w WORKDIR]
 *       -- ARGV..., all NUL-terminated), run as `fleet-shim shim FILE TOKEN ARG`.
 *       Makes the container's cgroup (-m: a directory, -l: a limit, in order; exit 121 when a
 *       directory cannot be made), then DIR's stdout/stderr FIFOs unless they are there, and
 *       holds them open read-write for life; starts the workload, which joins the cgroups,
 *       enters the pod's namespaces (of HOLDER_PID: pid, ipc, uts, [net with -n], mount), starts
 *       a session, restores default signal dispositions, enters WORKDIR, finds ARGV[0] along the
 *       environment's PATH and execs it, reporting a failure in DIR/start-error (exit 128);
 *       writes DIR/pid ("<shim pid> <workload pid>"), answers "TOKEN <shim pid> <workload pid>", and when the workload ends
 *       writes DIR/exit (its code, or 128 + the signal). Unlike sh + nsenter, the workload is the
 *       shim's own child even in a pod: the shim joins the pod's pid namespace for its children
 *       only (setns), so no process sits between them.
 *     - a pod's holder (FILE: MAGIC, "holder", "net" or "", HOSTNAME or "" for ARG, then -m and
 *       -l steps making the pod's cgroup, as the shim's), run as
 *       `fleet-shim holder FILE TOKEN ARG`: the launcher starts it in new namespaces (pid, mount,
 *       uts, ipc [, net]), as `unshare --pid --fork --mount --uts --ipc [--net] --mount-proc
 *       --propagation private` would, but with no process left waiting between: it is pid 1
 *       itself. It makes the mounts private, mounts /proc, sets the hostname, answers "TOKEN
 *       <its host pid> <its host pid>" ("TOKEN <pid> -" when it failed, also from the launcher when
 *       the namespaces could not be made), so the box neither looks for the holder in /proc nor
 *       starts a container in a pod whose /proc is not there yet; then it reaps orphans forever.
 *     - anything else: an sh script, sourced by `SH` with $1 the token and $2 the arg, as the sh
 *       launcher does (the box's other launches: output FIFOs made ahead, the sh chain).
 *
 *   fleet-shim version
 *     Prints the protocol version (the box's check that a build runs).
 *
 * The container's environment is passed in the launch file (which the box removes once the
 * launch answered), never in an argument list anyone can read.
 */

#include <asm/unistd.h>
#include <linux/fcntl.h>
#include <linux/sched.h>
#include <linux/stat.h>

#define VERSION "2"

typedef unsigned long size_t;

/* ------------------------------------------------------------------------------------------ */
/* System calls                                                                                */

static long syscall6(long n, long a, long b, long c, long d, long e, long f) {
#if defined(__x86_64__)
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9) : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
  return x0;
#else
#error "fleet-shim: x86_64 and aarch64 only (the box falls back to its sh chain elsewhere)"
#endif
}

#define sys0(n) syscall6(n, 0, 0, 0, 0, 0, 0)
#define sys1(n, a) syscall6(n, (long)(a), 0, 0, 0, 0, 0)
#define sys2(n, a, b) syscall6(n, (long)(a), (long)(b), 0, 0, 0, 0)
#define sys3(n, a, b, c) syscall6(n, (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define sys4(n, a, b, c, d) syscall6(n, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define sys5(n, a, b, c, d, e) syscall6(n, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)
#define sys6(n, a, b, c, d, e, f) syscall6(n, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))

#define EINTR 4
#define ENOENT 2
#define EACCES 13
#define ECHILD 10
#define ENOEXEC 8

#define SIGINT 2
#define SIGKILL 9
#define SIGPIPE 13
#define SIGTERM 15
#define SIGCHLD 17
#define SIGSTOP 19
#define NSIG 64
#define SIG_DFL 0
#define SIG_IGN 1
#define SIG_BLOCK 0
#define SIG_SETMASK 2

#define MS_NOSUID 2
#define MS_NODEV 4
#define MS_NOEXEC 8
#define MS_REC 16384
#define MS_PRIVATE (1 << 18)

#define X_OK 1

/* The kernel's struct sigaction (x86_64 and aarch64 alike): no handlers here, so no restorer. */
struct ksigaction {
  unsigned long handler;
  unsigned long flags;
  unsigned long restorer;
  unsigned long mask;
};

__attribute__((noreturn)) static void exit_now(int code) {
  for (;;) sys1(__NR_exit_group, code);
}

static int open_at(const char *path, int flags, int mode) { return (int)sys4(__NR_openat, AT_FDCWD, path, flags | O_CLOEXEC, mode); }
static void close_fd(int fd) { sys1(__NR_close, fd); }
static int move_fd(int from, int to) {
  if (from == to) return 0;
  if (sys3(__NR_dup3, from, to, 0) < 0) return -1;
  close_fd(from);
  return 0;
}
static long self_pid(void) { return sys0(__NR_getpid); }

/*
 * Start a process that runs fn(arg) and then execs or exits; `flags` may add namespaces
 * (CLONE_NEW*). Its pid, or a negative errno. On x86_64 the child borrows this process's memory
 * until it execs (clone with CLONE_VM | CLONE_VFORK, on a stack of its own, this process waiting
 * meanwhile), so no page table is copied and none torn down at its exec: on the hypervisors
 * Fleet runs on, a fork of a small static program costs 0.6-0.8 ms of CPU and this about
 * 0.05 ms. So fn may write only its own stack, and must not return into anything (it exits with
 * fn's value). Elsewhere it is a fork.
 */
#if defined(__x86_64__)
long spawn_vm(unsigned long flags, void *stack_top, int (*fn)(void *), void *arg);
__asm__(".text\n.type spawn_vm,@function\nspawn_vm:\n"
        " and $-16, %rsi\n sub $16, %rsi\n mov %rdx, 0(%rsi)\n mov %rcx, 8(%rsi)\n"
        " mov $56, %eax\n xor %edx, %edx\n xor %r10d, %r10d\n xor %r8d, %r8d\n syscall\n"
        " test %rax, %rax\n jnz 1f\n"
        /* the child, on its own stack: fn(arg), then exit_group with its value */
        " xor %ebp, %ebp\n pop %rax\n pop %rdi\n call *%rax\n mov %eax, %edi\n mov $231, %eax\n syscall\n hlt\n"
        "1:\n ret\n");
static char spawn_stack[64 * 1024] __attribute__((aligned(16)));
static long spawn(unsigned long flags, int (*fn)(void *), void *arg) {
  return spawn_vm(flags | CLONE_VM | CLONE_VFORK | SIGCHLD, spawn_stack + sizeof spawn_stack, fn, arg);
}
#else
static long spawn(unsigned long flags, int (*fn)(void *), void *arg) {
  long pid = sys5(__NR_clone, flags | SIGCHLD, 0, 0, 0, 0);
  if (pid == 0) exit_now(fn(arg));
  return pid;
}
#endif

static void set_signal(int sig, unsigned long handler) {
  struct ksigaction sa = {handler, 0, 0, 0};
  sys4(__NR_rt_sigaction, sig, &sa, 0, sizeof(unsigned long));
}

/* The type bits of a path's mode (following symlinks), or 0 when it cannot be looked at. */
static unsigned path_type(const char *path) {
  struct statx st;
  if (sys5(__NR_statx, AT_FDCWD, path, 0, STATX_TYPE, &st) < 0) return 0;
  return st.stx_mode & S_IFMT;
}

/* wait4 through EINTR: the child's wait status, or -1. */
static long wait_child(long pid, int *status) {
  for (;;) {
    long r = sys4(__NR_wait4, pid, status, 0, 0);
    if (r != -EINTR) return r;
  }
}

/* The exit code a shell's `$?` gives for a wait status: the code, or 128 + the signal. */
static int code_of(int status) { return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f); }

/* ------------------------------------------------------------------------------------------ */
/* Strings (gcc may call memset and memcpy for its own copies, even freestanding)             */

void *memset(void *d, int c, size_t n) {
  unsigned char *p = d;
  while (n--) *p++ = (unsigned char)c;
  return d;
}
void *memcpy(void *d, const void *s, size_t n) {
  unsigned char *p = d;
  const unsigned char *q = s;
  while (n--) *p++ = *q++;
  return d;
}
static size_t len(const char *s) {
  size_t n = 0;
  while (s[n]) n++;
  return n;
}
static int same(const char *a, const char *b) {
  while (*a && *a == *b) a++, b++;
  return *a == *b;
}

/* A bounded string builder: too long a path fails as one that is not there. */
#define PATH_CAP 4096
struct buf {
  char s[PATH_CAP];
  size_t n;
  int over;
};
static void put(struct buf *b, const char *s) {
  for (; *s; s++) {
    if (b->n + 1 >= PATH_CAP) {
      b->over = 1;
      break;
    }
    b->s[b->n++] = *s;
  }
  b->s[b->n] = 0;
}
static void put_n(struct buf *b, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (b->n + 1 >= PATH_CAP) {
      b->over = 1;
      break;
    }
    b->s[b->n++] = s[i];
  }
  b->s[b->n] = 0;
}
static void put_num(struct buf *b, long v) {
  char d[24];
  int i = 0;
  if (v < 0) put(b, "-"), v = -v;
  do d[i++] = (char)('0' + v % 10), v /= 10;
  while (v > 0);
  while (i > 0) put_n(b, &d[--i], 1);
}
static void reset(struct buf *b) { b->n = 0, b->s[0] = 0, b->over = 0; }

/* Write all of a buffer (a pipe or a small file: short writes only on error). */
static int write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    long w = sys3(__NR_write, fd, s, n);
    if (w == -EINTR) continue;
    if (w <= 0) return -1;
    s += w, n -= (size_t)w;
  }
  return 0;
}

/* Replace a file's content: written beside it, then renamed over it. */
static int write_file(const char *dir, const char *name, const char *text) {
  struct buf tmp = {0}, to = {0};
  put(&tmp, dir), put(&tmp, "/"), put(&tmp, name), put(&tmp, ".tmp");
  put(&to, dir), put(&to, "/"), put(&to, name);
  if (tmp.over || to.over) return -1;
  int fd = open_at(tmp.s, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return -1;
  int ok = write_all(fd, text, len(text));
  close_fd(fd);
  if (ok < 0) return -1;
  return sys5(__NR_renameat2, AT_FDCWD, tmp.s, AT_FDCWD, to.s, 0) < 0 ? -1 : 0;
}

static const char *reason(long err) {
  switch (err) {
    case ENOENT: return "no such file or directory";
    case EACCES: return "permission denied";
    case ENOEXEC: return "exec format error";
    case 7: return "argument list too long";
    case 12: return "out of memory";
    case 26: return "text file busy";
    case 36: return "file name too long";
    case 40: return "too many levels of symbolic links";
    case 1: return "operation not permitted";
    case 22: return "invalid argument";
    default: return "error";
  }
}

/*
 * Answer the box "TOKEN <own pid> <child pid>" ("-" for no child) on stdout, the launcher's pipe
 * (which may be gone by now), and let go of the pipe.
 */
static void answer_line(const char *token, long self, long child) {
  struct buf b = {0};
  put(&b, token), put(&b, " "), put_num(&b, self), put(&b, " ");
  if (child > 0) put_num(&b, child);
  else put(&b, "-");
  put(&b, "\n");
  write_all(1, b.s, b.n);
}

/* A launch's one answer on stdout, "TOKEN SELF CHILD" (CHILD "-": it failed); then stdout is
   /dev/null, so nothing else it does can reach the box's pipe. */
static void answer_as(const char *token, long self, long child) {
  set_signal(SIGPIPE, SIG_IGN);
  answer_line(token, self, child);
  int null = open_at("/dev/null", O_WRONLY, 0);
  if (null >= 0) move_fd(null, 1);
}
static void answer(const char *token, long child) { answer_as(token, self_pid(), child); }

/* ------------------------------------------------------------------------------------------ */
/* shim                                                                                        */

#define MAX_CGROUPS 16
#define MAX_STEPS 32

/* Making a cgroup (Cgroups.steps in the box), in order: a directory (-m DIR, value 0), or a
   setting to write (-l FILE VALUE; best effort: a file the kernel lacks is skipped, as the box
   does). The box's thread would otherwise wait in mkdir on the kernel's cgroup lock. */
struct steps {
  const char *file[MAX_STEPS], *value[MAX_STEPS];
  int n;
};

/* Take args[*i] (and what follows) as a step if it is one; moves *i past it. */
static int parse_step(struct steps *st, char **args, int *i, int n) {
  if (same(args[*i], "-m") && *i + 1 < n && st->n < MAX_STEPS) {
    st->file[st->n] = args[++*i], st->value[st->n++] = 0;
    return 1;
  }
  if (same(args[*i], "-l") && *i + 2 < n && st->n < MAX_STEPS) {
    st->file[st->n] = args[++*i], st->value[st->n++] = args[++*i];
    return 1;
  }
  return 0;
}

/* mkdir -p: the directory and any missing parent (the box's own cgroup is made on first use). */
static int make_dirs(const char *path) {
  long r = sys3(__NR_mkdirat, AT_FDCWD, path, 0755);
  if (r == 0 || r == -17 /* EEXIST */) return 0;
  if (r != -ENOENT) return -1;
  struct buf parent = {0};
  put(&parent, path);
  size_t end = parent.n;
  while (end > 1 && parent.s[end - 1] != '/') end--;
  if (end <= 1 || parent.over) return -1;
  parent.s[end - 1] = 0;
  if (make_dirs(parent.s) < 0) return -1;
  r = sys3(__NR_mkdirat, AT_FDCWD, path, 0755);
  return r == 0 || r == -17 ? 0 : -1;
}

/* 0, or -1 when a directory could not be made. */
static int run_steps(const struct steps *st) {
  for (int i = 0; i < st->n; i++) {
    if (st->value[i] == 0) {
      if (make_dirs(st->file[i]) < 0) return -1;
    } else {
      int fd = open_at(st->file[i], O_WRONLY, 0);
      if (fd >= 0) write_all(fd, st->value[i], len(st->value[i])), close_fd(fd);
    }
  }
  return 0;
}

struct shim {
  const char *token, *dir, *workdir;
  const char *cgroups[MAX_CGROUPS];
  int ncgroups;
  struct steps steps; /* the container's cgroup, made first */
  long holder;
  int net;
  char **argv; /* the workload's, NULL-terminated (from the launch file) */
  char **envp;
};

/* The workload's side of the fork: never returns. `fail` is the start-error file's descriptor. */
__attribute__((noreturn)) static void workload(const struct shim *s, int fail, const int *ns, int nns) {
  struct buf b = {0}, msg = {0};
  /* Its standard streams, opened before the mount namespace changes what paths name. */
  int in = open_at("/dev/null", O_RDONLY, 0);
  put(&b, s->dir), put(&b, "/stdout.fifo");
  int out = open_at(b.s, O_WRONLY, 0);
  reset(&b), put(&b, s->dir), put(&b, "/stderr.fifo");
  int err = open_at(b.s, O_WRONLY, 0);
  if (in < 0 || out < 0 || err < 0) exit_now(120);
  /* Its cgroups, before anything it runs can fork out of their accounting ("0": this process). */
  for (int i = 0; i < s->ncgroups; i++) {
    int fd = open_at(s->cgroups[i], O_WRONLY, 0);
    if (fd < 0 || write_all(fd, "0", 1) < 0) exit_now(121);
    close_fd(fd);
  }
  /* The pod's namespaces (its pid namespace came with the fork), the mount namespace last. */
  static const int types[] = {CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWNET, CLONE_NEWNS};
  for (int i = 0; i < nns; i++) {
    if (ns[i] < 0) continue;
    long r = sys2(__NR_setns, ns[i], types[i]);
    if (r < 0) {
      put(&msg, "cannot enter the pod's namespaces: "), put(&msg, reason(-r)), put(&msg, "\n");
      write_all(fail, msg.s, msg.n);
      exit_now(128);
    }
    close_fd(ns[i]);
  }
  sys0(__NR_setsid);
  /* What `&` ignored (SIGINT, SIGQUIT) and the shim's SIGPIPE: the workload starts with defaults. */
  for (int sig = 1; sig <= NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP) set_signal(sig, SIG_DFL);
  unsigned long none = 0;
  sys4(__NR_rt_sigprocmask, SIG_SETMASK, &none, 0, sizeof none);
  if (move_fd(in, 0) < 0 || move_fd(out, 1) < 0 || move_fd(err, 2) < 0) exit_now(120);
  if (s->workdir[0] && sys1(__NR_chdir, s->workdir) < 0) {
    put(&msg, "working directory "), put(&msg, s->workdir), put(&msg, ": not found or not accessible\n");
    write_all(fail, msg.s, msg.n);
    exit_now(128);
  }
  /* The command, as a shell finds it: a path as it is, a name along PATH (empty entries: "."). */
  const char *cmd = s->argv[0];
  int slash = 0;
  for (const char *p = cmd; *p; p++)
    if (*p == '/') slash = 1;
  const char *path = 0;
  if (slash) {
    if (path_type(cmd) == S_IFREG && sys4(__NR_faccessat, AT_FDCWD, cmd, X_OK, 0) == 0) path = cmd;
    else put(&msg, cmd), put(&msg, ": no such executable file\n");
  } else {
    const char *dirs = "";
    for (char **e = s->envp; *e; e++)
      if ((*e)[0] == 'P' && (*e)[1] == 'A' && (*e)[2] == 'T' && (*e)[3] == 'H' && (*e)[4] == '=') dirs = *e + 5;
    for (const char *d = dirs;;) {
      const char *end = d;
      while (*end && *end != ':') end++;
      reset(&b);
      if (end == d) put(&b, ".");
      else put_n(&b, d, (size_t)(end - d));
      put(&b, "/"), put(&b, cmd);
      if (!b.over && path_type(b.s) == S_IFREG && sys4(__NR_faccessat, AT_FDCWD, b.s, X_OK, 0) == 0) {
        path = b.s;
        break;
      }
      if (!*end) break;
      d = end + 1;
    }
    if (!path) put(&msg, "executable file not found in PATH: "), put(&msg, cmd), put(&msg, "\n");
  }
  if (!path) {
    write_all(fail, msg.s, msg.n);
    exit_now(128);
  }
  long r = sys3(__NR_execve, path, s->argv, s->envp);
  if (r == -ENOEXEC) {
    /* A script without "#!": a shell runs it, as `exec` in sh would. */
    size_t n = 0;
    while (s->argv[n]) n++;
    char *argv[n + 2];
    argv[0] = "sh", argv[1] = (char *)path;
    for (size_t i = 1; i <= n; i++) argv[i + 1] = s->argv[i];
    r = sys3(__NR_execve, "/bin/sh", argv, s->envp);
  }
  put(&msg, cmd), put(&msg, ": cannot run it: "), put(&msg, reason(-r)), put(&msg, "\n");
  write_all(fail, msg.s, msg.n);
  exit_now(128);
}

struct workload_args {
  const struct shim *s;
  int fail;
  const int *ns;
};
static int workload_main(void *p) {
  const struct workload_args *w = p;
  workload(w->s, w->fail, w->ns, 4);
}

static int run_shim(struct shim *s) {
  struct buf out = {0}, err = {0}, b = {0};
  put(&out, s->dir), put(&out, "/stdout.fifo");
  put(&err, s->dir), put(&err, "/stderr.fifo");
  if (out.over || err.over) return 120;
  /* The FIFOs, unless the box moved two from its pool; held read-write for life, so the workload
     never gets EPIPE while the box is away (output waits in the pipe). */
  if (path_type(out.s) != S_IFIFO && sys4(__NR_mknodat, AT_FDCWD, out.s, S_IFIFO | 0600, 0) < 0) return 120;
  if (path_type(err.s) != S_IFIFO && sys4(__NR_mknodat, AT_FDCWD, err.s, S_IFIFO | 0600, 0) < 0) return 120;
  if (run_steps(&s->steps) < 0) return 121;
  int hold_out = open_at(out.s, O_RDWR, 0);
  int hold_err = open_at(err.s, O_RDWR, 0);
  put(&b, s->dir), put(&b, "/start-error");
  int fail = open_at(b.s, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (hold_out < 0 || hold_err < 0 || fail < 0) return 120;
  /* The pod's namespaces, by its holder. */
  int ns[4] = {-1, -1, -1, -1};
  static const char *names[] = {"ipc", "uts", "net", "mnt"};
  if (s->holder > 0) {
    for (int i = 0; i < 4; i++) {
      if (i == 2 && !s->net) continue;
      reset(&b), put(&b, "/proc/"), put_num(&b, s->holder), put(&b, "/ns/"), put(&b, names[i]);
      ns[i] = open_at(b.s, O_RDONLY, 0);
    }
    reset(&b), put(&b, "/proc/"), put_num(&b, s->holder), put(&b, "/ns/pid");
    int pid_ns = open_at(b.s, O_RDONLY, 0);
    /* For the children only: the shim itself stays where it is. */
    long r = pid_ns < 0 ? pid_ns : sys2(__NR_setns, pid_ns, CLONE_NEWPID);
    int missing = r < 0;
    for (int i = 0; i < 4; i++)
      if (ns[i] < 0 && (i != 2 || s->net)) missing = 1;
    if (missing) {
      const char *m = "cannot enter the pod's namespaces: its holder is gone\n";
      write_all(fail, m, len(m));
      return 128;
    }
    close_fd(pid_ns);
  }
  struct workload_args w = {s, fail, ns};
  long pid = spawn(0, workload_main, &w);
  if (pid < 0) return 120;
  for (int i = 0; i < 4; i++)
    if (ns[i] >= 0) close_fd(ns[i]);
  close_fd(fail);
  reset(&b), put_num(&b, self_pid()), put(&b, " "), put_num(&b, pid), put(&b, "\n");
  write_file(s->dir, "pid", b.s);
  answer(s->token, pid);
  int status = 0;
  if (wait_child(pid, &status) < 0) return 1;
  reset(&b), put_num(&b, code_of(status)), put(&b, "\n");
  write_file(s->dir, "exit", b.s);
  return 0;
}

/* A launch's arguments (after the token):
   DIR [-m CGROUP_DIR | -l FILE VALUE]... [-c FILE]... [-t HOLDER [-n]] [-w WORKDIR] -- ARGV... */
static int parse_shim(struct shim *s, char **args, int n) {
  if (n < 3) return -1;
  s->dir = args[0], s->workdir = "";
  int i = 1;
  for (; i < n && !same(args[i], "--"); i++) {
    const char *a = args[i];
    if (same(a, "-n")) s->net = 1;
    else if (i + 1 >= n) return -1;
    else if (same(a, "-c") && s->ncgroups < MAX_CGROUPS) s->cgroups[s->ncgroups++] = args[++i];
    else if (parse_step(&s->steps, args, &i, n)) continue;
    else if (same(a, "-w")) s->workdir = args[++i];
    else if (same(a, "-t")) {
      long v = 0;
      for (const char *p = args[++i]; *p; p++) v = v * 10 + (*p - '0');
      s->holder = v;
    } else return -1;
  }
  if (i + 1 >= n) return -1;
  s->argv = &args[i + 1];
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* holder                                                                                      */

/*
 * pid 1 of a pod: the launcher started it in the pod's new namespaces (pid, mount, uts, ipc
 * [, net]). It makes the mounts private, mounts its own /proc, sets the hostname, answers, and
 * then reaps whatever is handed to it, forever. No process waits for it, as `unshare --fork`
 * would: it answers its own host pid as both the namespaces' maker and their holder.
 */
static int run_holder(const char *token, const char *hostname, const struct steps *cgroup) {
  /* Its pid on the host: /proc is still the host's until its own is mounted over it. */
  char self[24];
  long n = sys4(__NR_readlinkat, AT_FDCWD, "/proc/self", self, sizeof self - 1);
  long pid = 0;
  for (long i = 0; i < n && self[i] >= '0' && self[i] <= '9'; i++) pid = pid * 10 + (self[i] - '0');
  /* Nothing mounted in the pod propagates back to the host. */
  if (pid <= 0 || self_pid() != 1 || run_steps(cgroup) < 0 ||
      sys5(__NR_mount, "none", "/", 0, MS_REC | MS_PRIVATE, 0) < 0 ||
      sys5(__NR_mount, "proc", "/proc", "proc", MS_NOSUID | MS_NOEXEC | MS_NODEV, 0) < 0) {
    answer_as(token, pid, 0);
    return 1;
  }
  sys2(__NR_sethostname, hostname, len(hostname));
  answer_as(token, pid, pid);
  int null = open_at("/dev/null", O_RDWR, 0);
  if (null >= 0) sys3(__NR_dup3, null, 0, 0), sys3(__NR_dup3, null, 1, 0), sys3(__NR_dup3, null, 2, 0);
#ifdef __NR_close_range
  sys3(__NR_close_range, 3, ~0U, 0);
#else
  if (null > 2) close_fd(null);
#endif
  /* Blocked, SIGCHLD stays pending without a handler, which sigtimedwait then takes. */
  unsigned long chld = 1UL << (SIGCHLD - 1);
  sys4(__NR_rt_sigprocmask, SIG_BLOCK, &chld, 0, sizeof chld);
  for (;;) {
    long r = sys4(__NR_wait4, -1, 0, 0, 0);
    if (r == -ECHILD) sys4(__NR_rt_sigtimedwait, &chld, 0, 0, sizeof chld);
  }
}

/* ------------------------------------------------------------------------------------------ */
/* launcher                                                                                    */

#define MAGIC "fleet-shim-launch 1\n"

/* A whole file, NUL-terminated, in a fresh mapping; its size in *size. */
static char *slurp(const char *path, size_t *size) {
  int fd = open_at(path, O_RDONLY, 0);
  if (fd < 0) return 0;
  struct statx st;
  if (sys5(__NR_statx, fd, "", 0x1000 /* AT_EMPTY_PATH */, STATX_SIZE, &st) < 0) return 0;
  size_t cap = (size_t)st.stx_size + 1;
  char *data = (char *)sys6(__NR_mmap, 0, cap, 3 /* read, write */, 0x22 /* private, anonymous */, -1, 0);
  if ((unsigned long)data > -4096UL) return 0;
  size_t got = 0;
  while (got + 1 < cap) {
    long r = sys3(__NR_read, fd, data + got, cap - 1 - got);
    if (r == -EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close_fd(fd);
  data[got] = 0;
  *size = got;
  return data;
}

/* The NUL-terminated strings of data[0, size) as a NULL-terminated array (in a fresh mapping). */
static char **strings(char *data, size_t size, int *count) {
  int n = 0;
  for (size_t i = 0; i < size; i++)
    if (data[i] == 0) n++;
  char **out = (char **)sys6(__NR_mmap, 0, (size_t)(n + 1) * sizeof(char *), 3, 0x22, -1, 0);
  if ((unsigned long)out > -4096UL) return 0;
  int k = 0;
  for (size_t i = 0; i < size && k < n; k++) {
    out[k] = data + i;
    i += len(data + i) + 1;
  }
  out[k] = 0;
  *count = k;
  return out;
}

/* A native launch file's strings after MAGIC (in a fresh mapping), or 0 when it is not one. */
static char **native_file(const char *file, int *n) {
  size_t size = 0, magic = len(MAGIC);
  char *data = slurp(file, &size);
  if (data == 0 || size < magic) return 0;
  for (size_t i = 0; i < magic; i++)
    if (data[i] != MAGIC[i]) return 0;
  char **f = strings(data + magic, size - magic, n);
  return f == 0 || *n < 1 ? 0 : f;
}

/* `fleet-shim shim FILE TOKEN ARG`: a container's shim, from its launch file. */
static int shim_role(const char *file, const char *token) {
  int n = 0;
  char **f = native_file(file, &n);
  if (f == 0 || !same(f[0], "shim")) return 2;
  /* The environment's entries (never empty), an empty string, then the shim's arguments. */
  int end = 1;
  while (end < n && f[end][0]) end++;
  if (end == n) return 2;
  f[end] = 0;
  static struct shim s;
  s.token = token;
  s.envp = &f[1];
  if (parse_shim(&s, &f[end + 1], n - end - 1) < 0) return 2;
  return run_shim(&s);
}

/* `fleet-shim holder FILE TOKEN ARG`: a pod's pid 1 ("holder", "net" or "", HOSTNAME or ""
   for ARG, then the steps making the pod's cgroup: -m DIR, -l FILE VALUE). */
static int holder_role(const char *file, const char *token, const char *arg) {
  int n = 0;
  char **f = native_file(file, &n);
  static struct steps cgroup;
  int ok = f != 0 && same(f[0], "holder") && n >= 3;
  for (int i = 3; ok && i < n; i++) ok = parse_step(&cgroup, f, &i, n);
  if (!ok) {
    answer_as(token, 0, 0);
    return 2;
  }
  return run_holder(token, f[2][0] ? f[2] : arg, &cgroup);
}

enum kind { SH, SHIM, HOLDER };

/* What a launch file is, from its first bytes; for a holder, the namespaces it needs. */
static enum kind peek(const char *file, unsigned long *ns) {
  char head[64];
  int fd = open_at(file, O_RDONLY, 0);
  if (fd < 0) return SH;
  long n;
  do n = sys3(__NR_read, fd, head, sizeof head - 1);
  while (n == -EINTR);
  close_fd(fd);
  size_t magic = len(MAGIC);
  if (n < (long)magic) return SH;
  for (size_t i = 0; i < magic; i++)
    if (head[i] != MAGIC[i]) return SH;
  head[n] = 0;
  const char *role = head + magic;
  if (!same(role, "holder")) return SHIM;
  const char *net = role + len(role) + 1;
  *ns = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC;
  if (net < head + n && same(net, "net")) *ns |= CLONE_NEWNET;
  return HOLDER;
}

struct start {
  const char *sh, *self, *token, *arg, *file;
  enum kind kind;
};

/*
 * A launch's child (spawn): stdin and stderr on /dev/null, stdout the box's pipe, no signal
 * blocked; then an sh script goes to `SH`, sourced with $1 the token and $2 the arg as the sh
 * launcher did, and a native launch to this program again, as `fleet-shim shim|holder FILE TOKEN
 * ARG` (what `ps` shows).
 */
static int start_one(void *p) {
  const struct start *st = p;
  unsigned long none = 0;
  sys4(__NR_rt_sigprocmask, SIG_SETMASK, &none, 0, sizeof none);
  int null = open_at("/dev/null", O_RDWR, 0);
  if (null >= 0) sys3(__NR_dup3, null, 0, 0), sys3(__NR_dup3, null, 2, 0), close_fd(null);
  char *envp[] = {0};
  if (st->kind == SH) {
    char *argv[] = {"sh", "-c", ". \"$0\"", (char *)st->file, (char *)st->token, (char *)st->arg, 0};
    sys3(__NR_execve, st->sh, argv, envp);
  } else {
    char *role = st->kind == HOLDER ? "holder" : "shim";
    char *argv[] = {"fleet-shim", role, (char *)st->file, (char *)st->token, (char *)st->arg, 0};
    sys3(__NR_execve, st->self, argv, envp);
  }
  return 127;
}

/* Reap every child that has ended (the launcher is the parent of what it starts). */
static void reap(void) {
  while (sys4(__NR_wait4, -1, 0, 1 /* WNOHANG */, 0) > 0) {
  }
}

/*
 * The launcher: reads "TOKEN ARG FILE" lines on stdin (FILE is the rest of the line) and starts
 * each in a fork of itself. It is their parent while it lives and reaps them as they end
 * (SIGCHLD through a signalfd, so no handler); when it ends, at the end of its input, what it
 * started lives on, the host's init their parent.
 */
static int run_launcher(const char *sh) {
  static char line[PATH_CAP + 256], self[PATH_CAP];
  /* This program's own path, which its children exec (not /proc/self/exe: `ps` would call them "exe"). */
  long got = sys4(__NR_readlinkat, AT_FDCWD, "/proc/self/exe", self, sizeof self - 1);
  if (got <= 0 || got >= (long)sizeof self - 1) return 1;
  self[got] = 0;
  size_t have = 0;
  unsigned long chld = 1UL << (SIGCHLD - 1);
  sys4(__NR_rt_sigprocmask, SIG_BLOCK, &chld, 0, sizeof chld);
  int sfd = (int)sys4(__NR_signalfd4, -1, &chld, sizeof chld, O_CLOEXEC | O_NONBLOCK);
  if (sfd < 0) return 1;
  for (;;) {
    char *nl = 0;
    for (size_t i = 0; i < have; i++)
      if (line[i] == '\n') {
        nl = &line[i];
        break;
      }
    if (nl == 0) {
      struct { int fd; short events, revents; } fds[2] = {{0, 1 /* POLLIN */, 0}, {sfd, 1, 0}};
      long p = sys5(__NR_ppoll, fds, 2, 0, 0, 0);
      if (p == -EINTR) continue;
      if (p < 0) return 1;
      if (fds[1].revents) {
        char info[128 * 4];
        while (sys3(__NR_read, sfd, info, sizeof info) > 0) {
        }
        reap();
      }
      if (fds[0].revents == 0) continue;
      if (have == sizeof line) have = 0; /* a line too long for any request: dropped */
      long r = sys3(__NR_read, 0, line + have, sizeof line - have);
      if (r == -EINTR) continue;
      if (r <= 0) {
        reap();
        return 0;
      }
      have += (size_t)r;
      continue;
    }
    *nl = 0;
    char *token = line, *arg = 0, *file = 0;
    for (char *p = line; *p; p++)
      if (*p == ' ') {
        *p = 0;
        if (arg == 0) arg = p + 1;
        else {
          file = p + 1;
          break;
        }
      }
    if (arg != 0 && file != 0) {
      struct start st = {sh, self, token, arg, file, SH};
      unsigned long ns = 0;
      st.kind = peek(file, &ns);
      /* A pod's holder starts in its namespaces, as their pid 1; one that cannot is told at once. */
      if (spawn(ns, start_one, &st) < 0 && st.kind == HOLDER) answer_line(token, self_pid(), 0);
    }
    size_t used = (size_t)(nl + 1 - line);
    memcpy(line, nl + 1, have - used); /* forward, byte by byte: safe, the source is above */
    have -= used;
  }
}

/* ------------------------------------------------------------------------------------------ */

__attribute__((used, noreturn)) void start_c(long *sp) {
  int argc = (int)sp[0];
  char **argv = (char **)(sp + 1);
  int code = 2;
  if (argc >= 3 && same(argv[1], "launcher")) code = run_launcher(argv[2]);
  else if (argc >= 5 && same(argv[1], "shim")) code = shim_role(argv[2], argv[3]);
  else if (argc >= 5 && same(argv[1], "holder")) code = holder_role(argv[2], argv[3], argv[4]); else if (argc >= 2 && same(argv[1], "version")) code = write_all(1, "fleet-shim " VERSION "\n", len("fleet-shim " VERSION "\n")) < 0;
  exit_now(code);
}

#if defined(__x86_64__)
__asm__(".text\n.globl _start\n_start:\n xor %rbp, %rbp\n mov %rsp, %rdi\n and $-16, %rsp\n call start_c\n hlt\n");
#elif defined(__aarch64__)
__asm__(".text\n.globl _start\n_start:\n mov x29, #0\n mov x0, sp\n bl start_c\n");
#endif
