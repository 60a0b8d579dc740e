/**
 * The small POSIX sh programs the process driver leaves running, and the argv that chains them.
 * They are passed inline (`sh -c SCRIPT`), never as files: a shell reads a script file as it
 * runs, so rewriting one under a running shim (a box upgrade) would corrupt it.
 *
 * Per container, one process outlives the box: the **shim** (`sh`, ~1.7 MB resident), started
 * through the Launcher (in the launcher's session) from a launch file that sets the container's
 * environment, so it is neither the box's child nor in its session. It
 *   1. makes the container's stdout/stderr FIFOs (unless the box moved two there from its
 *      FifoPool) and holds them open read-write, so the
 *      workload never gets EPIPE while the box is away (output waits in the pipe; see README),
 *   2. starts the workload in a subshell that first joins the container's cgroups (so nothing
 *      the workload forks escapes accounting or the memory limit), then execs the launch chain:
 *        setsid → [nsenter into the pod's namespaces] → [setpriv to the user] → sh stage2 → argv
 *      `setsid` and `setpriv` exec in place; nsenter stays as the workload's parent (joining a
 *      pid namespace needs a fork) and mirrors its exit status,
 *   3. writes `pid` ("<shim pid> <launched pid>"), says the same on its stdout (a pipe the box
 *      reads, so a start waits on an event, not a poll; SIGPIPE ignored, in case the box is
 *      gone by then), and, when the workload ends, `exit` (the shell's `$?`: the code, or 128 +
 *      the signal number).
 * Stage 2 runs last, inside the namespaces and as the container's user: it enters the working
 * directory and checks the command exists, reporting failure on fd 5 (`start-error`) so that a
 * wrong command is a `StartError`, not an ordinary exit 127.
 */
import { quote } from "./Launcher.js"

/**
 * The shim: `sh -c SHIM shim DIR TOKEN MKFIFO LAUNCH...`; env: the container's (process driver)
 * plus FLEET_SHIM_CGROUPS. Tools are absolute paths: the container's PATH may not have them.
 */
export const shimScript = `d=$1; token=$2; mk=$3; shift 3
[ -p "$d/stdout.fifo" ] && [ -p "$d/stderr.fifo" ] || "$mk" "$d/stdout.fifo" "$d/stderr.fifo" || exit 120
exec 3<>"$d/stdout.fifo" 4<>"$d/stderr.fifo" 5>"$d/start-error"
(
  read -r self _ </proc/self/stat
  for f in $FLEET_SHIM_CGROUPS; do echo "$self" >"$f" || exit 121; done
  unset FLEET_SHIM_CGROUPS
  exec "$@" 3>&- 4>&-
) </dev/null >"$d/stdout.fifo" 2>"$d/stderr.fifo" &
pid=$!
exec 5>&-
echo "$$ $pid" >"$d/pid"
trap '' PIPE
echo "$token $$ $pid"
exec >/dev/null
wait "$pid"
echo "$?" >"$d/exit"
`

/** Joins cgroups, then execs its argv: the start of an exec's chain (`sh -c ENTER enter ...`). */
export const enterScript = `read -r self _ </proc/self/stat
for f in $FLEET_SHIM_CGROUPS; do echo "$self" >"$f" || exit 121; done
unset FLEET_SHIM_CGROUPS
exec "$@"
`

/**
 * Stage 2: `sh -c STAGE2 stage2 FAILCODE WORKDIR ARGV...`. A start failure is written to fd 5
 * when the shim opened it (containers), else to stderr (exec), and exits FAILCODE.
 */
export const stage2Script = `code=$1; wd=$2; shift 2
fail() { { echo "$1" >&5; } 2>/dev/null || echo "$1" >&2; exit "$code"; }
if [ -n "$wd" ] && ! cd "$wd" 2>/dev/null; then fail "working directory $wd: not found or not accessible"; fi
case $1 in
  */*) [ -f "$1" ] && [ -x "$1" ] || fail "$1: no such executable file" ;;
  *) command -v "$1" >/dev/null 2>&1 || fail "executable file not found in PATH: $1" ;;
esac
exec "$@" 5>&-
`

/** The pod holder, pid 1 of the pod's pid namespace: sets the hostname, then reaps orphans. */
export const holderScript = `echo "$1" >/proc/sys/kernel/hostname
exec </dev/null >/dev/null 2>&1
while :; do sleep 2147483647 & wait; done
`

/** Absolute paths of the tools the chains use, resolved once at box start. */
export interface Tools {
  readonly sh: string
  readonly env: string
  readonly mkfifo: string
  readonly setsid: string
  readonly nsenter: string | undefined
  readonly unshare: string | undefined
  readonly setpriv: string | undefined
}

/** How to enter a container: the pod's namespaces (by its holder's pid) and the user. */
export interface Context {
  readonly holderPid: number | undefined
  /** The pod has its own network namespace (held by the holder too). */
  readonly net?: boolean
  readonly user: { readonly uid: number; readonly gid?: number; readonly supplementalGroups?: ReadonlyArray<number> } | undefined
}

/** The nsenter and setpriv part of a chain, then stage 2. */
const inside = (tools: Tools, ctx: Context, failCode: number, workingDir: string, argv: ReadonlyArray<string>) => {
  const out: Array<string> = []
  if (ctx.holderPid !== undefined && tools.nsenter !== undefined)
    out.push(tools.nsenter, "-t", String(ctx.holderPid), "-p", "-m", "-u", "-i", ...(ctx.net === true ? ["-n"] : []), "--")
  if (ctx.user !== undefined && tools.setpriv !== undefined) {
    const gid = ctx.user.gid ?? ctx.user.uid
    const groups = ctx.user.supplementalGroups ?? []
    out.push(
      tools.setpriv,
      `--reuid=${ctx.user.uid}`,
      `--regid=${gid}`,
      groups.length === 0 ? "--clear-groups" : `--groups=${groups.join(",")}`,
      "--"
    )
  }
  out.push(tools.sh, "-c", stage2Script, "stage2", String(failCode), workingDir, ...argv)
  return out
}

/** A valid sh variable name: exported by the launch file; anything else goes through `env`. */
const shellName = /^[A-Za-z_][A-Za-z0-9_]*$/

/** The process driver's chain after the shim: setsid, [nsenter], [setpriv], stage 2, argv. */
export const processChain = (tools: Tools, ctx: Context, workingDir: string, argv: ReadonlyArray<string>): Array<string> => [
  tools.setsid,
  ...inside(tools, ctx, 128, workingDir, argv)
]

/**
 * The launch file of a container: sourced by the Launcher with `$1` a token, it sets the
 * environment (the container's, for the process driver) and nothing else, and becomes the shim,
 * which runs `chain`. Kubernetes reports a container that cannot start with exit code 128.
 */
export const launchFile = (
  tools: Tools,
  dir: string,
  chain: ReadonlyArray<string>,
  env: Readonly<Record<string, string>>
): string => {
  const lines = ["unset PWD"]
  const odd: Array<string> = []
  for (const [k, v] of Object.entries(env)) {
    if (shellName.test(k)) lines.push(`export ${k}=${quote(v)}`)
    else odd.push(quote(`${k}=${v}`))
  }
  const shim = [tools.sh, "-c", shimScript, "shim", dir].map(quote)
  const envPrefix = odd.length === 0 ? "" : `${quote(tools.env)} ${odd.join(" ")} `
  lines.push(`exec ${envPrefix}${shim.join(" ")} "$1" ${quote(tools.mkfifo)} ${chain.map(quote).join(" ")}`)
  return `${lines.join("\n")}\n`
}

/**
 * The launch file of a pod holder, sourced by the Launcher with `$1` a token and `$2` the
 * hostname: answers "TOKEN <pid>", then becomes `unshare ...`, which forks the holder. With
 * `hostname`, the file names it itself (one not fit to pass as an argument), and one file serves
 * every pod otherwise.
 */
export const holderFile = (tools: Tools, net = false, hostname?: string): string => {
  const argv = [tools.unshare ?? "unshare", ...holderArgv(tools, "", net).slice(0, -1)].map(quote)
  return [
    "read -r self _ </proc/self/stat",
    'echo "$1 $self"',
    `exec ${argv.join(" ")} ${hostname === undefined ? '"$2"' : quote(hostname)} </dev/null >/dev/null 2>&1`,
    ""
  ].join("\n")
}

/** A hostname the launcher can pass as one argument (a DNS name, as Kubernetes requires one). */
export const plainHostname = (hostname: string): boolean => /^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(hostname)

/** argv of an exec (run by `sh`, detached, so a timeout can kill its whole session). */
export const execArgv = (
  tools: Tools,
  ctx: Context,
  workingDir: string,
  argv: ReadonlyArray<string>
): Array<string> => ["-c", enterScript, "enter", ...inside(tools, ctx, 126, workingDir, argv)]

/** argv of `unshare` making a pod's namespaces (`net`: a network namespace too), with the holder as their pid 1. */
export const holderArgv = (tools: Tools, hostname: string, net = false): Array<string> => [
  ...(net ? ["--net"] : []),
  "--pid",
  "--fork",
  "--mount",
  "--uts",
  "--ipc",
  "--mount-proc",
  "--propagation",
  "private",
  tools.sh,
  "-c",
  holderScript,
  "holder",
  hostname
]

/** Bind-mount a host path in a pod's mount namespace: `nsenter -t H -m -- sh -c MOUNT m HOST CTR ro|rw`. */
export const mountScript = `mkdir -p "$2" && mount --bind "$1" "$2" || exit 1
if [ "$3" = ro ]; then mount -o remount,bind,ro "$2" || exit 1; fi
`
