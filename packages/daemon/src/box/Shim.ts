/**
 * A container's and a pod holder's launch files: for the native shim (NativeShim.ts: NUL-separated
 * strings, `nativeLaunch`), or else the small POSIX sh programs described here, which the process
 * driver leaves running, and the argv that chains them.
 * They are passed inline (`sh -c SCRIPT`, or in a launch file the launcher sources and then
 * removes), never as files kept on disk: a shell reads a script file as it runs, so rewriting one
 * under a running shim (a box upgrade) would corrupt it.
 *
 * Per container, one process outlives the box: the **shim**, the Launcher's forked `sh` running
 * the container's launch file (in the launcher's session; ~1.2 MB resident), which sets the
 * container's environment and runs the shim script in place. On the VMs this runs on, starting a
 * program costs about a millisecond of CPU (fork, exec, page faults, and the dynamic loader's
 * cpuid probes, which trap to the hypervisor): the largest part of a pod start that is not the
 * workload's, so the chain execs as few programs as it can. The shim
 *   1. makes the container's stdout/stderr FIFOs (unless the box moved two there from its
 *      FifoPool) and holds them open read-write, so the
 *      workload never gets EPIPE while the box is away (output waits in the pipe; see README),
 *   2. starts the workload in a subshell that first joins the container's cgroups (so nothing
 *      the workload forks escapes accounting or the memory limit), then execs the launch chain:
 *        setsid → env (SIGINT and SIGQUIT back to default; NAME=… for names sh cannot export)
 *          → [nsenter into the pod's namespaces] → argv
 *      `setsid` execs in place; nsenter stays as the workload's parent (joining a pid namespace
 *      needs a fork) and mirrors its exit status,
 *   3. writes `pid` ("<shim pid> <launched pid>"), says the same on its stdout (a pipe the box
 *      reads, so a start waits on an event, not a poll; SIGPIPE ignored, in case the box is
 *      gone by then), and, when the workload ends, `exit` (the shell's `$?`: the code, or 128 +
 *      the signal number).
 * Before the chain, the subshell enters the working directory (nsenter's `--wdns` in a pod's
 * namespaces) and checks that the command exists, through `/proc/<holder>/root` when the pod has
 * its own mount namespace, reporting failure on fd 5 (`start-error`) so that a wrong command is a
 * `StartError`, not an ordinary exit 127. A confined container (another user, its own
 * capabilities, no_new_privs: Confinement.ts) instead ends its chain with [`unshare --mount` for
 * a read-only root,] `setpriv` and **stage 2**, an `sh` that makes those checks as that user.
 */
import { spawnSync } from "node:child_process"
import type * as Cgroups from "./Cgroups.js"
import { setprivArgs } from "./Confinement.js"
import { quote } from "./Launcher.js"
import { which } from "./Tools.js"

/**
 * The shim, run in place by a container's launch file after `set -- TOKEN DIR MKFIFO ROOT WD
 * CHECK COMMAND CHAIN...`; env: the container's (process driver) plus FLEET_SHIM_CGROUPS. ROOT
 * is the pod's root as the host sees it (`/proc/<holder>/root`) or empty; CHECK is 1 when the
 * shim is to enter WD and check COMMAND (the workload's) itself, 0 when stage 2 does. Its own
 * variables are `kbox_…`: it runs in the shell that exported the container's environment, whose
 * names it must not reuse.
 */
export const shimScript = `kbox_token=$1 kbox_d=$2 kbox_mk=$3 kbox_root=$4 kbox_wd=$5 kbox_check=$6 kbox_cmd=$7; shift 7
[ -p "$kbox_d/stdout.fifo" ] && [ -p "$kbox_d/stderr.fifo" ] || "$kbox_mk" "$kbox_d/stdout.fifo" "$kbox_d/stderr.fifo" || exit 120
exec 3<>"$kbox_d/stdout.fifo" 4<>"$kbox_d/stderr.fifo" 5>"$kbox_d/start-error"
(
  read -r kbox_self _ </proc/self/stat
  for kbox_f in $FLEET_SHIM_CGROUPS; do echo "$kbox_self" >"$kbox_f" || exit 121; done
  unset FLEET_SHIM_CGROUPS
  if [ "$kbox_check" = 1 ]; then
    kbox_fail() { echo "$1" >&5; exit 128; }
    # A path as the workload will see it: through the pod's root, from its working directory.
    kbox_at() {
      if [ -z "$kbox_root" ]; then kbox_p=$1
      else case $1 in /*) kbox_p=$kbox_root$1 ;; *) kbox_p=$kbox_root/\${kbox_wd:+$kbox_wd/}$1 ;; esac; fi
    }
    if [ -n "$kbox_wd" ]; then
      if [ -z "$kbox_root" ]; then cd "$kbox_wd" 2>/dev/null || kbox_fail "working directory $kbox_wd: not found or not accessible"
      else case $kbox_wd in /*) kbox_p=$kbox_root$kbox_wd ;; *) kbox_p=$kbox_root/$kbox_wd ;; esac
        [ -d "$kbox_p" ] || kbox_fail "working directory $kbox_wd: not found or not accessible"; fi
    fi
    case $kbox_cmd in
      */*) kbox_at "$kbox_cmd"; [ -f "$kbox_p" ] && [ -x "$kbox_p" ] || kbox_fail "$kbox_cmd: no such executable file" ;;
      *) kbox_ok=; kbox_ifs=$IFS; IFS=:
        for kbox_dir in $PATH; do kbox_at "\${kbox_dir:-.}/$kbox_cmd"; if [ -f "$kbox_p" ] && [ -x "$kbox_p" ]; then kbox_ok=1; break; fi; done
        IFS=$kbox_ifs; [ -n "$kbox_ok" ] || kbox_fail "executable file not found in PATH: $kbox_cmd" ;;
    esac
    exec 5>&-
  fi
  exec "$@" 3>&- 4>&-
) </dev/null >"$kbox_d/stdout.fifo" 2>"$kbox_d/stderr.fifo" &
kbox_pid=$!
exec 5>&-
read -r kbox_self _ </proc/self/stat
echo "$kbox_self $kbox_pid" >"$kbox_d/pid"
trap '' PIPE
echo "$kbox_token $kbox_self $kbox_pid"
exec >/dev/null
wait "$kbox_pid"
echo "$?" >"$kbox_d/exit"
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

/**
 * The pod holder, pid 1 of the pod's pid namespace: sets the hostname, then reaps orphans. It
 * waits on a forked copy of itself blocked reading fd 3, the box's idle FIFO (which no one
 * writes), rather than on a `sleep`: a fork of `sh`, not a program to start.
 */
export const holderScript = `echo "$1" >/proc/sys/kernel/hostname
exec </dev/null >/dev/null 2>&1
while :; do (read -r _ <&3) & wait; done
`

/** Absolute paths of the tools the chains use, resolved once at box start. */
export interface Tools {
  readonly sh: string
  readonly env: string
  readonly mkfifo: string
  readonly setsid: string
  /** env has `--default-signal` (coreutils 8.31): a chain restores the signals `&` ignored. */
  readonly envDefaultSignal: boolean
  readonly nsenter: string | undefined
  /** nsenter can enter a working directory in the namespaces it enters (`--wdns`, util-linux 2.38). */
  readonly nsenterWdns: boolean
  readonly unshare: string | undefined
  readonly setpriv: string | undefined
  /**
   * The native shim (NativeShim.ts), when the box has one: it is then the launcher, and starts a
   * container or a pod's holder itself from a native launch file, instead of this module's chain.
   */
  readonly native: string | undefined
}

/** How to enter a container: the pod's namespaces (by its holder's pid) and the user. */
export interface Context {
  readonly holderPid: number | undefined
  /** The pod has its own network namespace (held by the holder too). */
  readonly net?: boolean
  readonly user: { readonly uid: number; readonly gid?: number; readonly supplementalGroups?: ReadonlyArray<number> } | undefined
  /** Exactly these capabilities (Confinement.ts); undefined: the launcher's. */
  readonly capabilities?: ReadonlyArray<string> | undefined
  readonly noNewPrivs?: boolean
  /** The container's root filesystem read-only: a mount namespace of its own, `/` remounted ro. */
  readonly readOnlyRoot?: boolean
}

/** Does the container change its identity or privileges (setpriv, then stage 2)? */
const confined = (ctx: Context): boolean =>
  ctx.user !== undefined || ctx.capabilities !== undefined || ctx.noNewPrivs === true || ctx.readOnlyRoot === true

/** In a mount namespace of the container's own, `/` read-only (its volumes keep their modes), then its argv. */
export const readOnlyRootScript = `mount -o remount,bind,ro / || exit 1
exec "$@"
`

/** nsenter into a pod's namespaces, without the closing `--`. */
const enter = (tools: Tools, ctx: Context): Array<string> =>
  ctx.holderPid !== undefined && tools.nsenter !== undefined
    ? [tools.nsenter, "-t", String(ctx.holderPid), "-p", "-m", "-u", "-i", ...(ctx.net === true ? ["-n"] : [])]
    : []

/** The nsenter and setpriv part of a chain, then stage 2. */
const inside = (tools: Tools, ctx: Context, failCode: number, workingDir: string, argv: ReadonlyArray<string>) => {
  const out: Array<string> = enter(tools, ctx)
  if (out.length > 0) out.push("--")
  if (ctx.readOnlyRoot === true && tools.unshare !== undefined)
    out.push(tools.unshare, "--mount", "--propagation", "private", "--", tools.sh, "-c", readOnlyRootScript, "ro")
  const user = ctx.user === undefined ? undefined : { uid: ctx.user.uid, gid: ctx.user.gid ?? ctx.user.uid, groups: ctx.user.supplementalGroups ?? [] }
  const args = setprivArgs({ user, capabilities: ctx.capabilities, noNewPrivs: ctx.noNewPrivs === true, readOnlyRoot: false })
  if (args.length > 0 && tools.setpriv !== undefined) out.push(tools.setpriv, ...args, "--")
  out.push(tools.sh, "-c", stage2Script, "stage2", String(failCode), workingDir, ...argv)
  return out
}

/** A valid sh variable name: exported by the launch file; anything else goes through `env`. */
const shellName = /^[A-Za-z_][A-Za-z0-9_]*$/

/** What a container runs: the process driver's side of a launch. */
export interface Workload {
  readonly ctx: Context
  readonly workingDir: string
  readonly argv: ReadonlyArray<string>
  /** The container's environment (the process driver's: PATH and the spec's). */
  readonly env: Readonly<Record<string, string>>
  /** The `cgroup.procs` files the workload joins before it execs (none without cgroups). */
  readonly cgroupFiles: ReadonlyArray<string>
  /**
   * Making the container's cgroup, for the native shim to do before the workload joins it
   * (Cgroups.steps); the box made it already otherwise.
   */
  readonly cgroupSteps?: ReadonlyArray<Cgroups.Step>
}

/**
 * Does the native shim start this workload? It does unless the container is confined (another
 * user, capabilities, no_new_privs, a read-only root): setpriv does that, and stage 2 then checks
 * the command as that user.
 */
export const nativeFits = (tools: Tools, workload: Pick<Workload, "ctx">): boolean => tools.native !== undefined && !confined(workload.ctx)

/** How a native launch file begins (native/fleet-shim.c); the native launcher sources anything else with sh. */
export const nativeMagic = "fleet-shim-launch 1\n"

/** Cgroup steps as the native shim's and holder's arguments: `-m DIR`, `-l FILE VALUE`. */
const stepArgs = (steps: ReadonlyArray<Cgroups.Step>): Array<string> =>
  steps.flatMap((s) => ("mkdir" in s ? ["-m", s.mkdir] : ["-l", s.write[0], s.write[1]]))

/** NUL-terminated strings, as a native launch file holds them. */
const nulTerminated = (fields: ReadonlyArray<string>): string => fields.map((f) => `${f}\0`).join("")

/**
 * The native launch of a container: "shim", the environment's entries, "", then DIR
 * [-m CGROUP_DIR | -l FILE VALUE]... [-c FILE]... [-t HOLDER [-n]] [-w WORKDIR] -- ARGV...
 * (native/fleet-shim.c).
 */
const nativeLaunch = (dir: string, workload: Workload): string => {
  const { ctx, workingDir, argv } = workload
  const args = [dir, ...stepArgs(workload.cgroupSteps ?? []), ...workload.cgroupFiles.flatMap((f) => ["-c", f])]
  if (ctx.holderPid !== undefined) args.push("-t", String(ctx.holderPid), ...(ctx.net === true ? ["-n"] : []))
  if (workingDir !== "") args.push("-w", workingDir)
  const env = Object.entries(workload.env).map(([k, v]) => `${k}=${v}`)
  return nativeMagic + nulTerminated(["shim", ...env, "", ...args, "--", ...argv])
}

/**
 * The launch file of a container: sourced by the Launcher with `$1` a token, it exports the
 * container's environment and runs the shim in place (see above). Kubernetes reports a container
 * that cannot start with exit code 128.
 */
export const launchFile = (tools: Tools, dir: string, workload: Workload): string => {
  if (nativeFits(tools, workload)) return nativeLaunch(dir, workload)
  const { ctx, workingDir, argv } = workload
  const lines = ["unset PWD"]
  const odd: Array<string> = []
  for (const [k, v] of Object.entries(workload.env)) {
    if (shellName.test(k)) lines.push(`export ${k}=${quote(v)}`)
    else odd.push(`${k}=${v}`)
  }
  if (workload.cgroupFiles.length > 0) lines.push(`export FLEET_SHIM_CGROUPS=${quote(workload.cgroupFiles.join(" "))}`)
  const isolated = ctx.holderPid !== undefined && tools.nsenter !== undefined
  // The shim checks the command and enters the working directory itself, unless the container
  // runs as another user (then stage 2 does, as that user) or nsenter cannot enter it.
  const check = !confined(ctx) && (workingDir === "" || !isolated || tools.nsenterWdns)
  // Every fork the launcher and the shim make with `&` ignores SIGINT and SIGQUIT (POSIX, for
  // asynchronous commands without job control), and an exec keeps what is ignored: env puts them
  // back, or `kfleet signal INT` and a stopSignal of SIGINT or SIGQUIT would reach nothing.
  const restore = tools.envDefaultSignal ? ["--default-signal=INT,QUIT"] : []
  const chain = [tools.setsid, ...(odd.length === 0 && restore.length === 0 ? [] : [tools.env, ...restore, ...odd])]
  if (check) {
    if (isolated) chain.push(...enter(tools, ctx), ...(workingDir === "" ? [] : [`--wdns=${workingDir}`]), "--")
    chain.push(...argv)
  } else chain.push(...inside(tools, ctx, 128, workingDir, argv))
  const root = isolated ? `/proc/${ctx.holderPid}/root` : ""
  const args = ['"$1"', ...[dir, tools.mkfifo, root, workingDir, check ? "1" : "0", argv[0] ?? "", ...chain].map(quote)]
  lines.push(`set -- ${args.join(" ")}`, shimScript)
  return lines.join("\n")
}

/**
 * The launch file of a pod holder, run by the Launcher with `$1` a token and `$2` the hostname.
 * The native launcher's holder answers "TOKEN <pid> <holder pid>" itself once the holder is ready
 * (`-` for the holder when it failed). Otherwise the file, sourced, answers "TOKEN <pid>" and
 * becomes `unshare ...`, which forks the holder, with the idle FIFO (`idle()`) open read-write on
 * fd 3 (see holderScript). With `hostname`, the file names it itself (one not fit to pass as an
 * argument), and one file serves every pod otherwise.
 */
export const holderFile = (tools: Tools, idle: () => string, net = false, hostname?: string, steps: ReadonlyArray<Cgroups.Step> = []): string => {
  if (tools.native !== undefined) return nativeMagic + nulTerminated(["holder", net ? "net" : "", hostname ?? "", ...stepArgs(steps)])
  const name = hostname === undefined ? '"$2"' : quote(hostname)
  const argv = [tools.unshare ?? "unshare", ...holderArgv(tools, "", net).slice(0, -1)].map(quote)
  return [
    "read -r self _ </proc/self/stat",
    'echo "$1 $self"',
    `exec ${argv.join(" ")} ${name} </dev/null >/dev/null 2>&1 3<>${quote(idle())}`,
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

/** Does this nsenter have `--wdns` (util-linux 2.38)? Without it, stage 2 enters working directories. */
const nsenterEntersWorkingDirs = (nsenter: string | undefined): boolean =>
  nsenter !== undefined && spawnSync(nsenter, ["--help"], { encoding: "utf8" }).stdout?.includes("--wdns") === true

/** Can this env put ignored signals back to their default (`--default-signal`, coreutils 8.31)? */
const envRestoresSignals = (env: string): boolean => spawnSync(env, ["--default-signal=INT,QUIT", "true"]).status === 0

/** The tools of this host the chain uses (the native shim is added by the driver that finds one). */
export const hostTools = (): Tools => {
  const env = which("env") ?? "/usr/bin/env"
  const nsenter = which("nsenter")
  return {
    sh: which("sh") ?? "/bin/sh",
    env,
    mkfifo: which("mkfifo") ?? "/usr/bin/mkfifo",
    setsid: which("setsid") ?? "setsid",
    envDefaultSignal: envRestoresSignals(env),
    nsenter,
    nsenterWdns: nsenterEntersWorkingDirs(nsenter),
    unshare: which("unshare"),
    setpriv: which("setpriv"),
    native: undefined
  }
}
