/**
 * The box's `runc` driver: real OCI containers from imported rootfs images, run by `runc`. It
 * implements core's Runtime port with the process driver's semantics (created → running →
 * exited, stop with grace then SIGKILL, exec, CRI log files, stats, re-adoption), so the kbox
 * server and the agent cannot tell the two apart but for `info`.
 *
 *   create ─▶ image resolved and pinned (digest) ─▶ state.json (created)
 *   start  ─▶ rootfs: overlay (image read-only below, a writable layer per container) or a copy
 *            ─▶ bundle/config.json (Oci.config) ─▶ FIFOs ─▶ box Writer ─▶ container.log
 *            ─▶ shim (sh, detached, outlives the box) ─▶ runc run --keep (foreground) ─▶ container
 *            shim: `exit` ← runc's exit status (the container's: code, or 128 + signal)
 *   exit   ─▶ (shim exit event | `exit` file watch | 1 s poll) ─▶ OOM? (cgroup counter, read
 *            before the cgroup goes) ─▶ runc delete ─▶ unmount ─▶ state.json (exited)
 *   restart of the box ─▶ state.json files + `runc list` ─▶ live shims re-adopted, dead ones
 *            finalized from `exit`, runc containers nobody owns deleted; nothing runs twice.
 *
 * Why a shim around a *foreground* `runc run`: a detached runc container's exit status is known
 * only to the parent (or subreaper) of its init, and `runc state` just says "stopped". Foreground
 * `runc run` makes itself that subreaper and exits with the container's status; the shim (a
 * session of its own, ~0.5 MB) waits for it and writes the status to a file, so the box can die
 * and come back without losing it (containerd-shim and conmon exist for the same reason). The
 * cost is runc's resident Go process per container (~10 MB). `--keep` leaves the stopped
 * container (and its cgroup) in place until the box has read its OOM counter, then deletes it.
 *
 * Output: the shim opens the FIFOs read-write and gives them to runc as stdout/stderr, so the
 * container never gets EPIPE while no box reads (output waits in the pipe: the process driver's
 * trade-off, docs/box.md). A pod is a sandbox record, the pod's cgroup (its limits) and a holder
 * process owning the pod's UTS (hostname) and IPC namespaces, which every container joins; each
 * container has its own pid and mount namespaces, and the host's network. Where the kernel allows
 * it the holder also owns a user namespace the containers join: a 65536-id host range per pod
 * (UserNamespace.ts), the rootfs a copy owned by that range (docs/box.md, "runc pods").
 */
import { Runtime } from "@koder/fleet-core"
import { Effect, Either, Stream } from "effect"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  rmdirSync,
  statSync,
  watch,
  writeFileSync
} from "node:fs"
import type { FSWatcher } from "node:fs"
import { chmod, chown, mkdir, rename, rm, writeFile } from "node:fs/promises"
import { constants as osConstants } from "node:os"
import { basename, dirname, join } from "node:path"
import * as Cgroups from "./Cgroups.js"
import * as EnvSeal from "./EnvSeal.js"
import * as Confinement from "./Confinement.js"
import * as ContainerLogs from "./ContainerLogs.js"
import { ImageStore, toImages } from "./Images.js"
import * as Oci from "./Oci.js"
import * as Procfs from "./Procfs.js"
import { which } from "./Tools.js"
import * as UserNamespace from "./UserNamespace.js"

/** How the driver is set up. */
export interface Options {
  readonly dataDir: string
  /** The runc binary (default: `runc` on PATH). */
  readonly runc?: string
  readonly logRotation?: ContainerLogs.Rotation
  /** Liveness poll of running containers, for exits no event reported (default 1000 ms). */
  readonly pollIntervalMs?: number
  /** `auto` (default): an overlay mount per container when the kernel has overlayfs, else a copy. */
  readonly rootfs?: "auto" | "copy"
  /** `auto` (default): a user namespace per pod where the kernel allows one (UserNamespace.probe); `off`: none. */
  readonly userns?: "auto" | "off"
}

/** What `open` returns: the Runtime service, the driver's identity, and how to let go of it. */
export interface Handle {
  readonly runtime: Runtime.RuntimeService
  readonly info: Runtime.Info
  /** Whether pods get user namespaces, and why not. */
  readonly userns: UserNamespace.Probe
  /** Stop watching; containers keep running for the next box to adopt. */
  readonly close: () => void
}

/** What the driver reports as its version. */
export const version = "0.1.0"

/** Output of an exec kept per stream; more is cut (an exec is a probe or a command, not a pipe). */
const maxExecOutput = 4 * 1024 * 1024

/** How long a container may take to be running after its shim started. */
const startTimeoutMs = 30_000

/**
 * The shim: `sh -c SHIM kbox-runc-shim DIR RUNC ROOT ID`. It holds nothing but runc's exit
 * status: runc gets the FIFOs (opened read-write here, so no writer ever sees EPIPE), writes its
 * own errors to `runc.log` (JSON), the container's init pid to `init.pid` once it runs.
 */
const shimScript = `d=$1; runc=$2; root=$3; id=$4
exec 3<>"$d/stdout.fifo" 4<>"$d/stderr.fifo" </dev/null >/dev/null 2>&1
echo "$$" >"$d/shim"
"$runc" --root "$root" --log "$d/runc.log" --log-format json run --keep --bundle "$d/bundle" --pid-file "$d/init.pid" "$id" >&3 2>&4 3>&- 4>&-
echo "$?" >"$d/exit"
`

/**
 * A pod's holder: `unshare --uts --ipc -- sh -c HOLDER kbox-holder HOSTNAME SLEEP`; with a user
 * namespace (`unshare --user --uts --ipc`) it first waits for a line on stdin: the box writes it
 * once it has written the namespace's id maps (only a process outside may write them).
 */
const holderUsernsScript = `read -r _ || exit 1
echo "$1" >/proc/sys/kernel/hostname || exit 1
exec "$2" 2147483647 </dev/null
`

const holderScript = `echo "$1" >/proc/sys/kernel/hostname || exit 1
exec "$2" 2147483647
`

interface ProcessId {
  readonly pid: number
  readonly startTime: number
}

interface SandboxRecord {
  readonly id: string
  readonly spec: Runtime.SandboxSpec
  readonly createdAt: string
  readonly bootId: string
  /** The process owning the pod's UTS and IPC namespaces (`sleep`, after setting the hostname). */
  holder?: ProcessId
  /** The uid its containers run as when they name none (Confinement.uidRange). */
  uid?: number
  /** The first host id of its user namespace's range (UserNamespace); absent: no user namespace. */
  ids?: number
}

interface ContainerRecord {
  readonly id: string
  readonly spec: Runtime.ContainerSpec
  readonly createdAt: string
  readonly bootId: string
  /** The image, pinned at create: a tag moved later does not change what this container runs. */
  readonly image: { readonly digest: string; readonly rootfs: string }
  status: Runtime.ContainerStatus
  /** How its root filesystem was made (at start): an overlay mount to undo, or a plain copy. */
  rootfs?: "overlay" | "copy"
  /**
   * In a user namespace: where the rootfs copy is bind-mounted for runc (under /run, which the
   * pod's root may traverse: the data dir need not be), to unmount and remove when it ends.
   */
  root?: string
  shim?: ProcessId
  /** The container's init process (host pid). */
  init?: ProcessId
}

/** A container's live bookkeeping beside its record. */
interface Live {
  rec: ContainerRecord
  writer: ContainerLogs.Writer | undefined
  watcher: FSWatcher | undefined
  starting: Promise<void> | undefined
  finalizing: Promise<void> | undefined
  exited: Promise<void>
  markExited: () => void
  lastCpu: { readonly nanos: number; readonly at: number } | undefined
}

const now = () => new Date().toISOString()
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
const newId = () => randomBytes(8).toString("hex")

const notFound = (kind: Runtime.ObjectKind, id: string) =>
  new Runtime.NotFound({ kind, id, message: `${kind} ${id} not found` })
const invalid = (message: string) => new Runtime.Invalid({ message })
const unavailable = (message: string) => new Runtime.Unavailable({ message })

const writeJson = (path: string, value: unknown) => {
  const tmp = `${path}.${randomBytes(4).toString("hex")}.tmp`
  writeFileSync(tmp, JSON.stringify(value), { mode: 0o600 })
  renameSync(tmp, path)
}

const writeAtomic = async (path: string, text: string) => {
  const tmp = `${path}.${randomBytes(4).toString("hex")}.tmp`
  await writeFile(tmp, text, { mode: 0o600 })
  await rename(tmp, path)
}

/** Drop `process.env` from an OCI config runc has read (nothing reads it again). */
const scrubEnv = async (file: string) => {
  try {
    const config = JSON.parse(readFileSync(file, "utf8")) as { process?: { env?: ReadonlyArray<string> } }
    if (config.process?.env === undefined) return
    await writeAtomic(file, JSON.stringify({ ...config, process: { ...config.process, env: [] } }))
  } catch {
    // gone with its container
  }
}

const readText = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}

/** The status the shim recorded, once complete (the file exists empty a moment before). */
const exitCodeIn = (dir: string): number | undefined => {
  const m = /^(\d+)\n$/.exec(readText(join(dir, "exit")) ?? "")
  return m ? Number(m[1]) : undefined
}

/** The last error runc logged (`--log-format json`), without runc's "runc run failed: " preamble. */
export const lastRuncError = (text: string | undefined): string | undefined => {
  let out: string | undefined
  for (const line of (text ?? "").split("\n")) {
    try {
      const entry = JSON.parse(line) as { level?: string; msg?: string }
      if (entry.level === "error" || entry.level === "fatal") out = entry.msg
    } catch {
      // not a JSON line
    }
  }
  return out?.replace(/^runc (run|exec) failed: /, "")
}

const signalNumber = (name: string): number | undefined =>
  (osConstants.signals as Record<string, number | undefined>)[name]

const signalOf = (name: string): string | undefined => {
  const upper = name.toUpperCase()
  if (/^\d+$/.test(upper)) {
    const n = Number(upper)
    return Object.keys(osConstants.signals).find((k) => signalNumber(k) === n)
  }
  const full = upper.startsWith("SIG") ? upper : `SIG${upper}`
  return signalNumber(full) === undefined ? undefined : full
}

const processId = (pid: number | undefined): ProcessId | undefined => {
  if (pid === undefined || !Number.isInteger(pid) || pid <= 0) return undefined
  const s = Procfs.stat(pid)
  return s === undefined ? undefined : { pid, startTime: s.startTime }
}

const alive = (p: ProcessId | undefined) => p !== undefined && Procfs.isAlive(p.pid, p.startTime)

const killPid = (p: ProcessId | undefined, signal: NodeJS.Signals) => {
  if (!alive(p)) return
  try {
    process.kill(p!.pid, signal)
  } catch {
    // gone
  }
}

/** Run a command to its end; never rejects (a spawn failure is code -1). */
const run = (
  file: string,
  args: ReadonlyArray<string>,
  env: Record<string, string> = { PATH: Oci.defaultPath }
): Promise<{ readonly code: number; readonly stdout: string; readonly stderr: string }> =>
  new Promise((resolve) => {
    const child = spawn(file, args, { stdio: ["ignore", "pipe", "pipe"], env, cwd: "/" })
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (b: Buffer) => (stdout += b.toString()))
    child.stderr!.on("data", (b: Buffer) => (stderr += b.toString()))
    child.once("error", (e) => resolve({ code: -1, stdout, stderr: e.message }))
    child.once("close", (code, signal) => resolve({ code: code ?? 128 + (signalNumber(signal ?? "SIGKILL") ?? 9), stdout, stderr }))
  })

/** Resolve when a child process has been spawned, reject when it could not be. */
const spawned = (child: ChildProcess) =>
  new Promise<void>((resolve, reject) => {
    child.once("spawn", resolve)
    child.once("error", reject)
  })

/** A symlink's target (/proc/PID/ns/*), undefined when it cannot be read. */
const readlinkOr = (path: string): string | undefined => {
  try {
    return readlinkSync(path)
  } catch {
    return undefined
  }
}

/** Remove an empty directory; anything else (a mount still there, gone already) is left. */
const rmdirQuiet = (path: string) => {
  try {
    rmdirSync(path)
  } catch {
    // not empty or still mounted: left in place
  }
}

/** Mount points (decoded) from /proc/self/mountinfo. */
const mountPoints = (): Set<string> => {
  const out = new Set<string>()
  for (const line of (readText("/proc/self/mountinfo") ?? "").split("\n")) {
    const p = line.split(" ")[4]
    if (p !== undefined) out.add(p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
  }
  return out
}

/**
 * Where runc puts a relative cgroup path in every mounted hierarchy (cgroup v1 resolves it
 * under this process's own cgroup per hierarchy, v2 under the parent of its own): the
 * hierarchies Cgroups does not manage (cpuset, devices, freezer, name=systemd, ...) get
 * directories too, which runc leaves behind for a pod's and the box's levels.
 */
export const hierarchyDirs = (relative: string, mountinfo: string, procCgroup: string): Array<string> => {
  const own = procCgroup.split("\n").map((l) => /^(\d+):([^:]*):(.*)$/.exec(l)).filter((m) => m !== null)
  const out: Array<string> = []
  for (const line of mountinfo.split("\n")) {
    const [left, right] = line.split(" - ")
    if (left === undefined || right === undefined) continue
    const mountPoint = left.split(" ")[4]
    const [fstype, , superOptions] = right.split(" ")
    if (mountPoint === undefined) continue
    if (fstype === "cgroup2") {
      const path = own.find((m) => m![1] === "0" && m![2] === "")?.[3] ?? "/"
      out.push(join(mountPoint, path, relative), join(mountPoint, dirname(path), relative))
    } else if (fstype === "cgroup") {
      const options = new Set((superOptions ?? "").split(","))
      const m = own.find((m) => m![2] !== "" && m![2]!.split(",").every((c) => options.has(c)))
      if (m) out.push(join(mountPoint, m[3]!, relative))
    }
  }
  return [...new Set(out)]
}

/**
 * cgroup v1 with swap accounting: the limit must then cover memory+swap too, or it only moves
 * pages to swap (runc refuses a swap limit where the files are missing).
 */
const memswAccounting = (): boolean => {
  const memory = Cgroups.parseMountinfo(readText("/proc/self/mountinfo") ?? "").v1.get("memory")
  return memory !== undefined && existsSync(join(memory, "memory.memsw.limit_in_bytes"))
}

/** rmdir a cgroup directory and its children, deepest first; busy ones stay. */
const removeCgroupTree = (d: string) => {
  try {
    for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) removeCgroupTree(join(d, e.name))
    rmdirSync(d)
  } catch {
    // gone, or still has processes
  }
}

/** The runc driver. Open it with `RuncDriver.open`; it adopts what a previous box left running. */
export class RuncDriver {
  readonly info: Runtime.Info
  readonly images: ImageStore
  private readonly runcPath: string
  private readonly tools: { readonly sh: string; readonly unshare: string; readonly sleep: string; readonly mkfifo: string }
  private readonly cg: Cgroups.Cgroups
  /** The box's cgroup level (`kbox-<hash of the data dir>`), shared with Cgroups. */
  private readonly cgroupBase: string
  private readonly swapLimit: boolean
  private overlay: boolean
  /** Whether pods get user namespaces (probed once at open). */
  readonly userns: UserNamespace.Probe
  /** Where user-namespaced containers' rootfs are bind-mounted (`/run/kbox-<hash of the data dir>`, 0711). */
  private readonly rootsDir: string
  private readonly rotation: ContainerLogs.Rotation
  private readonly sandboxes = new Map<string, SandboxRecord>()
  private readonly containers = new Map<string, Live>()
  private readonly bootId = Procfs.bootId()
  private readonly saving = new Map<string, Promise<void>>()
  /** Seals containers' environments in their records (EnvSeal; the key in `runc/env.key`, 0600). */
  private envSeal: EnvSeal.EnvSeal = EnvSeal.make(randomBytes(32))
  private readonly hostFiles: ReadonlyArray<string>
  private poller: NodeJS.Timeout | undefined
  private closed = false

  private constructor(private readonly options: Options) {
    if (process.getuid?.() !== 0) throw unavailable("the runc driver needs root")
    const runc = options.runc ?? which("runc")
    if (runc === undefined || !existsSync(runc))
      throw unavailable("runc not found on PATH: install it (Debian: apt-get install runc) or use --driver process")
    const need = (name: string) => {
      const p = which(name)
      if (p === undefined) throw unavailable(`the runc driver needs ${name} on PATH`)
      return p
    }
    this.runcPath = runc
    this.tools = { sh: need("sh"), unshare: need("unshare"), sleep: need("sleep"), mkfifo: need("mkfifo") }
    need("tar")
    this.cg = Cgroups.detect(options.dataDir)
    // Cgroups names the box's level after the data dir; read it from a path it hands out.
    const probe = this.cg.procsFiles("probe")[0]
    this.cgroupBase =
      probe === undefined
        ? `kbox-${createHash("sha256").update(options.dataDir).digest("hex").slice(0, 12)}`
        : basename(dirname(dirname(probe)))
    this.swapLimit = this.cg.version === "v2" || (this.cg.version === "v1" && memswAccounting())
    this.overlay = options.rootfs !== "copy" && /\toverlay\n/.test(readText("/proc/filesystems") ?? "")
    this.rotation = options.logRotation ?? { maxBytes: 10 * 1024 * 1024, maxFiles: 2 }
    this.rootsDir = join("/run", `kbox-${createHash("sha256").update(options.dataDir).digest("hex").slice(0, 12)}`)
    this.userns =
      options.userns === "off"
        ? { enabled: false, reason: "turned off (userns: off)" }
        : !existsSync("/run")
          ? { enabled: false, reason: "there is no /run to mount the pods' root filesystems under" }
          : UserNamespace.probe(this.tools.unshare)
    this.hostFiles = ["/etc/resolv.conf", "/etc/hosts"].filter((f) => existsSync(f))
    this.images = ImageStore.open(options.dataDir)
    this.info = {
      name: "koder-fleet-box",
      version,
      driver: "runc",
      capabilities: {
        isolation: "oci",
        namespaces: ["pid", "mount", "uts", "ipc"],
        cgroups: this.cg.version,
        limits: this.cg.limits,
        bindMounts: true,
        runAsUser: true,
        podNetwork: false,
        checkpoint: false,
        networkPolicy: false,
        drivers: ["process", "runc"]
      }
    }
  }

  /** Open the data dir: take its lock, load and re-adopt its sandboxes and containers. */
  static open(options: Options): RuncDriver {
    const d = new RuncDriver(options)
    d.lock()
    d.envSeal = EnvSeal.load(join(options.dataDir, "runc"))
    d.load()
    d.poller = setInterval(() => d.pollAll(), options.pollIntervalMs ?? 1000)
    d.poller.unref()
    return d
  }

  private get dataDir() {
    return this.options.dataDir
  }

  /** runc's state directory (`--root`), under the data dir so two boxes never share one. */
  get runcRoot(): string {
    return join(this.dataDir, "runc", "state")
  }

  private containerDir(id: string) {
    return join(this.dataDir, "runc", "containers", id)
  }

  private sandboxFile(id: string) {
    return join(this.dataDir, "runc", "sandboxes", `${id}.json`)
  }

  private runc(args: ReadonlyArray<string>) {
    return run(this.runcPath, ["--root", this.runcRoot, ...args])
  }

  /** One box per data dir, whatever its driver (the process driver takes the same lock file). */
  private lock() {
    for (const d of ["containers", "sandboxes", "state"]) mkdirSync(join(this.dataDir, "runc", d), { recursive: true, mode: 0o700 })
    const file = join(this.dataDir, "box.pid")
    const [pid, start] = (readText(file) ?? "").trim().split(" ").map(Number)
    if (pid !== undefined && pid !== process.pid && Procfs.isAlive(pid, start))
      throw unavailable(`another box (pid ${pid}) serves ${this.dataDir}`)
    const self = Procfs.stat(process.pid)
    const tmp = `${file}.${process.pid}.tmp`
    writeFileSync(tmp, `${process.pid} ${self?.startTime ?? 0}\n`, { mode: 0o600 })
    renameSync(tmp, file)
  }

  /** Stop watching (containers keep running: the next box adopts them). */
  close(): void {
    this.closed = true
    if (this.poller) clearInterval(this.poller)
    for (const c of this.containers.values()) {
      c.writer?.close()
      c.writer = undefined
      c.watcher?.close()
      c.watcher = undefined
    }
    // A container that ended while this box closed keeps its cgroup (runc --keep) until the next
    // box has read its OOM counter: the box's level goes only when no container is left to finalize.
    if (![...this.containers.values()].some((c) => c.rec.status.state === "running")) {
      this.cg.release()
      rmdirQuiet(this.rootsDir)
      for (const d of hierarchyDirs(this.cgroupBase, readText("/proc/self/mountinfo") ?? "", readText("/proc/self/cgroup") ?? ""))
        try {
          rmdirSync(d)
        } catch {
          // pods' levels are still there, or it is gone
        }
    }
    const file = join(this.dataDir, "box.pid")
    if ((readText(file) ?? "").startsWith(`${process.pid} `)) rmSync(file, { force: true })
  }

  // ---------------------------------------------------------------------------------------------
  // Adoption
  // ---------------------------------------------------------------------------------------------

  /** runc's containers under this box's root: id → status. */
  private runcList(): Map<string, string> {
    const r = spawnSync(this.runcPath, ["--root", this.runcRoot, "list", "--format", "json"], { encoding: "utf8" })
    if (r.status !== 0) throw unavailable(`runc list: ${(r.stderr || r.error?.message || "failed").trim()}`)
    const list = (JSON.parse(r.stdout.trim() || "null") ?? []) as Array<{ id: string; status: string }>
    return new Map(list.map((c) => [c.id, c.status]))
  }

  private load() {
    for (const name of readdirSync(join(this.dataDir, "runc", "sandboxes"))) {
      if (!name.endsWith(".json")) continue
      try {
        const rec = JSON.parse(readFileSync(join(this.dataDir, "runc", "sandboxes", name), "utf8")) as SandboxRecord
        this.sandboxes.set(rec.id, rec)
      } catch {
        // rename-written: never torn; anything else unreadable is skipped
      }
    }
    const known = this.runcList()
    const owned = new Set<string>()
    for (const id of readdirSync(join(this.dataDir, "runc", "containers"))) {
      const text = readText(join(this.containerDir(id), "state.json"))
      if (text === undefined) continue
      let rec: ContainerRecord
      try {
        const opened = EnvSeal.fromDisk(JSON.parse(text) as ContainerRecord & { sealedEnv?: string }, this.envSeal)
        rec = opened.rec
        // Its environment is gone with the key: it cannot start as it was made.
        if (!opened.ok && rec.status.state === "created") rec.status = this.lost(rec, "its environment could not be recovered (the box's key is gone)")
      } catch {
        continue
      }
      const live = this.track(rec)
      if (rec.status.state === "exited") live.markExited()
      if (rec.status.state !== "running") continue
      owned.add(id)
      if (rec.bootId !== this.bootId) {
        // The host rebooted: nothing of it survives, and its exit status is gone with it.
        rec.status = this.lost(rec, "the host restarted")
        void this.save(rec)
        live.markExited()
        continue
      }
      // The box stopped between starting the shim and recording it: the shim wrote its pid.
      if (rec.shim === undefined) {
        const shim = processId(Number((readText(join(this.containerDir(id), "shim")) ?? "").trim()))
        if (shim) rec.shim = shim
      }
      if (alive(rec.shim)) this.attach(live)
      else void this.refresh(live)
    }
    // runc containers no record runs (the box died while removing or finalizing one): not ours to keep.
    for (const id of known.keys()) if (!owned.has(id)) void this.runc(["delete", "--force", id])
  }

  private track(rec: ContainerRecord): Live {
    let markExited = () => {}
    const exited = new Promise<void>((r) => (markExited = r))
    const live: Live = {
      rec,
      writer: undefined,
      watcher: undefined,
      starting: undefined,
      finalizing: undefined,
      exited,
      markExited,
      lastCpu: undefined
    }
    this.containers.set(rec.id, live)
    return live
  }

  /** Persist a record: one write at a time per container, in call order, off the event loop. */
  private save(rec: ContainerRecord): Promise<void> {
    // The environment only sealed (Secret values never on disk in the clear).
    const env = rec.spec.env
    const text = JSON.stringify(EnvSeal.toDisk(rec, env === undefined || Object.keys(env).length === 0 ? undefined : this.envSeal.seal(env)))
    const path = join(this.containerDir(rec.id), "state.json")
    const next = (this.saving.get(rec.id) ?? Promise.resolve())
      .then(() => writeAtomic(path, text))
      .catch(() => undefined)
    this.saving.set(rec.id, next)
    void next.then(() => {
      if (this.saving.get(rec.id) === next) this.saving.delete(rec.id)
    })
    return next
  }

  private lost(rec: ContainerRecord, why: string): Runtime.ContainerStatus {
    return {
      state: "exited",
      exitCode: 255,
      reason: "Lost",
      message: `exit status unknown: ${why}`,
      ...(rec.status.startedAt === undefined ? {} : { startedAt: rec.status.startedAt }),
      finishedAt: now()
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Exit detection
  // ---------------------------------------------------------------------------------------------

  private pollAll() {
    if (this.closed) return
    for (const c of this.containers.values()) if (c.rec.status.state === "running") void this.refresh(c)
  }

  /** Has a running container's shim finished? Then finalize it (once). */
  private refresh(c: Live): Promise<void> {
    if (c.finalizing) return c.finalizing
    // A closed driver leaves every end to the next box (a shim it started still reports its exit to it).
    if (this.closed) return Promise.resolve()
    if (c.rec.status.state !== "running" || c.starting !== undefined) return Promise.resolve()
    const done = exitCodeIn(this.containerDir(c.rec.id)) !== undefined || !alive(c.rec.shim)
    if (!done) return Promise.resolve()
    c.finalizing = this.finalize(c).finally(() => (c.finalizing = undefined))
    return c.finalizing
  }

  /** Record how the container ended; leave no process, cgroup, mount or unread output behind. */
  private async finalize(c: Live): Promise<void> {
    const rec = c.rec
    const dir = this.containerDir(rec.id)
    // The shim writes `exit` just before it ends: give a shim that is exiting a moment.
    for (let i = 0; i < 50 && exitCodeIn(dir) === undefined && alive(rec.shim); i++) await sleep(10)
    const code = exitCodeIn(dir)
    const path = `${rec.spec.sandboxId}/${rec.id}`
    // Read before `runc delete` removes the cgroup with its counter.
    const oom = this.cg.oomKilled(path)
    const started = existsSync(join(dir, "init.pid"))
    const runcError = lastRuncError(readText(join(dir, "runc.log")))
    // Kills whatever is left (a shim that died leaves its container unsupervised) and removes
    // runc's state and the container's cgroups.
    await this.runc(["delete", "--force", rec.id])
    if (this.cg.version !== "none") await this.cg.killAll(path, 2_000)
    this.removeCgroups(path)
    if (c.writer) {
      c.writer.drainNow()
      c.writer.close()
      c.writer = undefined
    }
    c.watcher?.close()
    c.watcher = undefined
    await this.unmountRootfs(rec)
    let finishedAt = now()
    try {
      finishedAt = statSync(join(dir, "exit")).mtime.toISOString()
    } catch {
      // no exit file: now
    }
    const startedAt = rec.status.startedAt === undefined ? {} : { startedAt: rec.status.startedAt }
    if (code === undefined) rec.status = this.lost(rec, "the shim ended without recording it")
    else if (!started && code !== 0)
      // runc never got the process running: the image has no such command, working dir, user...
      rec.status = {
        state: "exited",
        exitCode: 128,
        reason: "StartError",
        message: runcError ?? `runc exited ${code} before the container ran`,
        ...startedAt,
        finishedAt
      }
    else {
      const signal = code > 128 && code < 128 + 65 ? signalOf(String(code - 128)) : undefined
      rec.status = {
        state: "exited",
        exitCode: code,
        reason: oom && code === 137 ? "OOMKilled" : Runtime.reasonOfExit(code),
        ...(signal === undefined ? {} : { signal }),
        ...startedAt,
        finishedAt
      }
    }
    delete rec.init
    await this.save(rec)
    c.markExited()
  }

  /** Wait up to `ms` for a running container to exit, checking rather than trusting events. */
  private async waitExit(c: Live, ms: number): Promise<boolean> {
    const end = Date.now() + ms
    for (;;) {
      await this.refresh(c)
      if (c.rec.status.state === "exited") return true
      const left = end - Date.now()
      if (left <= 0) return false
      await Promise.race([c.exited, sleep(Math.min(left, 25))])
    }
  }

  /** Follow a running container: its output, and its `exit` file (the shim is nobody's child after a restart). */
  private attach(c: Live) {
    const dir = this.containerDir(c.rec.id)
    try {
      c.watcher = watch(dir, (_event, name) => {
        if (name === "exit") void this.refresh(c)
      })
      c.watcher.on("error", () => undefined)
    } catch {
      // the poll remains
    }
    if (!existsSync(join(dir, "stdout.fifo")) || !existsSync(join(dir, "stderr.fifo"))) return
    const writer = new ContainerLogs.Writer(dir, this.rotation)
    c.writer = writer
    // Both FIFOs at end of file: runc and the shim have ended.
    void writer.attach().then(() => this.refresh(c))
    if (existsSync(join(dir, "exit"))) void this.refresh(c)
  }

  // ---------------------------------------------------------------------------------------------
  // Cgroups and root filesystems
  // ---------------------------------------------------------------------------------------------

  /** Remove `relative` (`<sandbox>[/<container>]` under the box's level) in every hierarchy, where empty. */
  private removeCgroups(relative: string) {
    this.cg.remove(relative)
    const dirs = hierarchyDirs(join(this.cgroupBase, relative), readText("/proc/self/mountinfo") ?? "", readText("/proc/self/cgroup") ?? "")
    for (const d of dirs) removeCgroupTree(d)
  }

  /** The container's root filesystem: an overlay on the image (or a copy of it). */
  private async prepareRootfs(rec: ContainerRecord, ids: number | undefined): Promise<"overlay" | "copy"> {
    const dir = this.containerDir(rec.id)
    const rootfs = join(dir, "bundle", "rootfs")
    await mkdir(rootfs, { recursive: true, mode: 0o755 })
    const lower = rec.image.rootfs
    if (!existsSync(lower)) throw invalid(`image ${rec.image.digest}: its rootfs is gone from ${lower}`)
    // overlayfs options are comma- and colon-separated: such paths cannot be said there. In a user
    // namespace the files must belong to the pod's range: a copy, its owners shifted (an overlay
    // would copy every file up to chown it anyway; runc 1.1 has no idmapped mounts).
    if (ids === undefined && this.overlay && !/[,:\\]/.test(lower + dir)) {
      await mkdir(join(dir, "upper"), { recursive: true, mode: 0o755 })
      await mkdir(join(dir, "work"), { recursive: true, mode: 0o700 })
      const r = await run("mount", [
        "-t",
        "overlay",
        "overlay",
        "-o",
        `lowerdir=${lower},upperdir=${join(dir, "upper")},workdir=${join(dir, "work")}`,
        rootfs
      ])
      if (r.code === 0) return "overlay"
      // e.g. the data dir is on a filesystem overlayfs cannot use as an upper layer: copy from now on.
      this.overlay = false
    }
    const r = await run("cp", ["-a", `${lower}/.`, rootfs])
    if (r.code !== 0) throw unavailable(`copying the image's rootfs: ${r.stderr.trim()}`)
    if (ids !== undefined) await UserNamespace.shiftTree(rootfs, ids)
    return "copy"
  }

  /**
   * Bind-mount a user-namespaced container's rootfs under /run: runc's init resolves the rootfs
   * path as the pod's root, an unprivileged host id, which cannot pass the data dir's 0700 parents.
   */
  private async mountRoot(rec: ContainerRecord, ids: number): Promise<string> {
    await mkdir(this.rootsDir, { recursive: true, mode: 0o711 })
    // Its directory only the pod's root may pass (root:ids 0710): any host user can read mount
    // points from /proc/*/mountinfo, and the copy's files are as readable as in the image.
    const parent = join(this.rootsDir, rec.id)
    await mkdir(parent, { recursive: true, mode: 0o700 })
    await chown(parent, 0, ids)
    await chmod(parent, 0o710)
    const target = join(parent, "rootfs")
    await mkdir(target, { recursive: true, mode: 0o700 })
    rec.root = target
    const r = await run("mount", ["--bind", join(this.containerDir(rec.id), "bundle", "rootfs"), target])
    if (r.code !== 0) throw unavailable(`mounting the rootfs at ${target}: ${r.stderr.trim()}`)
    return target
  }

  private async unmountRootfs(rec: ContainerRecord): Promise<void> {
    const targets = [
      ...(rec.root === undefined ? [] : [rec.root]),
      ...(rec.rootfs === "overlay" ? [join(this.containerDir(rec.id), "bundle", "rootfs")] : [])
    ]
    for (const target of targets) {
      if (mountPoints().has(target) && (await run("umount", [target])).code !== 0) await run("umount", ["-l", target])
      // The bind's mount point under /run: empty once unmounted (rmdir never deletes through a mount).
      if (target === rec.root) {
        rmdirQuiet(target)
        rmdirQuiet(dirname(target))
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Sandboxes
  // ---------------------------------------------------------------------------------------------

  private ready(rec: SandboxRecord): boolean {
    return rec.bootId === this.bootId && alive(rec.holder)
  }

  private sandboxOf(rec: SandboxRecord): Runtime.Sandbox {
    return { id: rec.id, spec: rec.spec, state: this.ready(rec) ? "ready" : "notready", ...(rec.uid === undefined ? {} : { uid: rec.uid }), createdAt: rec.createdAt }
  }

  async createSandbox(spec: Runtime.SandboxSpec): Promise<Runtime.Sandbox> {
    for (const s of this.sandboxes.values())
      if (s.spec.podUid === spec.podUid)
        throw new Runtime.AlreadyExists({ kind: "sandbox", id: s.id, message: `pod ${spec.podUid} already has sandbox ${s.id}` })
    if (spec.network === "pod")
      throw invalid("network: this box has no pod networking (capabilities.podNetwork is false); use host")
    const used = new Set([...this.sandboxes.values()].flatMap((s) => (s.uid === undefined ? [] : [s.uid])))
    const uid = Confinement.allocateUid(used)
    if (uid === undefined) throw unavailable(`sandbox: every uid of ${Confinement.uidRange.first}-${Confinement.uidRange.last} is in use`)
    let ids: number | undefined
    if (this.userns.enabled) {
      ids = UserNamespace.allocateRange(new Set([...this.sandboxes.values()].flatMap((s) => (s.ids === undefined ? [] : [s.ids]))))
      if (ids === undefined) throw unavailable("sandbox: every user namespace id range is in use")
    }
    const rec: SandboxRecord = { id: newId(), spec, createdAt: now(), bootId: this.bootId, uid, ...(ids === undefined ? {} : { ids }) }
    // Claimed before the first await, so a concurrent create for the same pod sees it.
    this.sandboxes.set(rec.id, rec)
    try {
      if (this.cg.version !== "none") await this.cg.create(rec.id, spec.resources)
      rec.holder = await this.startHolder(
        (spec.hostname ?? spec.name).slice(0, 63),
        ids === undefined ? undefined : UserNamespace.mapText(UserNamespace.mappings(ids, uid))
      )
      writeJson(this.sandboxFile(rec.id), rec)
    } catch (e) {
      this.sandboxes.delete(rec.id)
      killPid(rec.holder, "SIGKILL")
      this.removeCgroups(rec.id)
      throw e instanceof Runtime.Unavailable ? e : unavailable(`sandbox: ${e instanceof Error ? e.message : String(e)}`)
    }
    return this.sandboxOf(rec)
  }

  /** The pod's holder: new UTS and IPC namespaces, the hostname set, then `sleep` (nobody's child). */
  private async startHolder(hostname: string, idMap: string | undefined): Promise<ProcessId> {
    const script = idMap === undefined ? holderScript : holderUsernsScript
    const child = spawn(
      this.tools.unshare,
      [...(idMap === undefined ? [] : ["--user"]), "--uts", "--ipc", "--", this.tools.sh, "-c", script, "kbox-holder", hostname, this.tools.sleep],
      { detached: true, stdio: [idMap === undefined ? "ignore" : "pipe", "ignore", "ignore"], cwd: "/", env: {} }
    )
    await spawned(child)
    child.unref()
    const holder = processId(child.pid)
    if (idMap !== undefined && holder !== undefined)
      try {
        await this.mapHolder(holder, idMap)
        // Flushed before the pipe goes: without the line the holder exits.
        await new Promise<void>((resolve) => child.stdin!.end("\n", () => resolve()))
      } catch (e) {
        killPid(holder, "SIGKILL")
        throw e
      } finally {
        child.stdin!.destroy()
      }
    // Ready once it became `sleep`: the hostname is set by then.
    for (let i = 0; i < 1000 && holder !== undefined && alive(holder); i++) {
      if (Procfs.cmdline(holder.pid)[0] === this.tools.sleep) return holder
      await sleep(i < 20 ? 1 : 5)
    }
    killPid(holder, "SIGKILL")
    throw unavailable("sandbox: the namespace holder did not start")
  }

  /** Write a new holder's uid and gid maps, once `unshare` made its user namespace (it differs from ours). */
  private async mapHolder(holder: ProcessId, idMap: string): Promise<void> {
    const ours = readlinkOr("/proc/self/ns/user")
    for (let i = 0; i < 1000 && alive(holder); i++) {
      const theirs = readlinkOr(`/proc/${holder.pid}/ns/user`)
      if (theirs !== undefined && theirs !== ours) {
        await writeFile(`/proc/${holder.pid}/uid_map`, idMap)
        await writeFile(`/proc/${holder.pid}/gid_map`, idMap)
        return
      }
      await sleep(i < 20 ? 1 : 5)
    }
    throw unavailable("sandbox: the namespace holder made no user namespace")
  }

  getSandbox(id: string): Runtime.Sandbox {
    const rec = this.sandboxes.get(id)
    if (rec === undefined) throw notFound("sandbox", id)
    return this.sandboxOf(rec)
  }

  listSandboxes(filter?: Runtime.SandboxFilter): Array<Runtime.Sandbox> {
    return [...this.sandboxes.values()].map((s) => this.sandboxOf(s)).filter((s) => Runtime.matchesSandbox(s, filter))
  }

  async removeSandbox(id: string): Promise<void> {
    const rec = this.sandboxes.get(id)
    if (rec === undefined) return
    await Promise.all(
      [...this.containers.values()].filter((c) => c.rec.spec.sandboxId === id).map((c) => this.removeContainer(c.rec.id))
    )
    if (rec.bootId === this.bootId) killPid(rec.holder, "SIGKILL")
    if (this.cg.version !== "none") await this.cg.killAll(id)
    this.removeCgroups(id)
    rmSync(this.sandboxFile(id), { force: true })
    this.sandboxes.delete(id)
  }

  // ---------------------------------------------------------------------------------------------
  // Containers
  // ---------------------------------------------------------------------------------------------

  private live(id: string): Live {
    const c = this.containers.get(id)
    if (c === undefined) throw notFound("container", id)
    return c
  }

  /**
   * A container's confinement (Confinement.ts: its pod's uid when it names none); undefined for a
   * request without `security`, which runs as before (root, Docker's capabilities).
   */
  private confinementOf(spec: Runtime.ContainerSpec): Confinement.Confinement | undefined {
    if (spec.security === undefined) return undefined
    const c = Confinement.decide(spec, this.sandboxes.get(spec.sandboxId)?.uid)
    if (Either.isLeft(c)) throw invalid(c.left)
    return c.right
  }

  async createContainer(spec: Runtime.ContainerSpec): Promise<Runtime.Container> {
    if (!this.sandboxes.has(spec.sandboxId)) throw notFound("sandbox", spec.sandboxId)
    if (spec.image === undefined || spec.image === "")
      throw invalid("image: required by the runc driver (import one: koder-fleet box image import FILE --name NAME:TAG)")
    if (spec.command.length === 0) throw invalid("command: required (rootfs images carry no default command)")
    for (const [k, v] of Object.entries(spec.env ?? {}))
      if (k === "" || k.includes("=") || k.includes("\0") || v.includes("\0"))
        throw invalid(`env: invalid variable ${JSON.stringify(k)} (no "=" in names, no NUL anywhere)`)
    for (const a of [...spec.command, ...(spec.args ?? []), spec.workingDir ?? ""])
      if (a.includes("\0")) throw invalid("command, args, workingDir: no NUL characters")
    if (spec.workingDir !== undefined && spec.workingDir !== "" && !spec.workingDir.startsWith("/"))
      throw invalid(`workingDir: ${JSON.stringify(spec.workingDir)} must be absolute`)
    const confinement = Confinement.decide(spec, this.sandboxes.get(spec.sandboxId)?.uid)
    if (Either.isLeft(confinement)) throw invalid(confinement.left)
    for (const m of spec.mounts ?? [])
      if (!m.containerPath.startsWith("/") || !m.hostPath.startsWith("/"))
        throw invalid(`mounts: ${m.hostPath} at ${m.containerPath}: both paths must be absolute`)
    if (spec.stopSignal !== undefined && signalOf(spec.stopSignal) === undefined)
      throw invalid(`stopSignal: unknown signal ${spec.stopSignal}`)
    const duplicate = () => {
      for (const c of this.containers.values()) {
        const s = c.rec.spec
        if (s.sandboxId === spec.sandboxId && s.name === spec.name && s.attempt === spec.attempt)
          throw new Runtime.AlreadyExists({
            kind: "container",
            id: c.rec.id,
            message: `container ${spec.name} attempt ${spec.attempt} exists as ${c.rec.id}`
          })
      }
    }
    duplicate()
    const image = await this.images.resolve(spec.image)
    // Checked again after the await: a concurrent create of the same attempt may have won.
    duplicate()
    const rec: ContainerRecord = {
      id: newId(),
      spec,
      createdAt: now(),
      bootId: this.bootId,
      image: { digest: image.digest, rootfs: image.rootfs },
      status: { state: "created" }
    }
    this.track(rec)
    await mkdir(this.containerDir(rec.id), { recursive: true, mode: 0o700 })
    await this.save(rec)
    return this.view(rec)
  }

  private view(rec: ContainerRecord): Runtime.Container {
    this.findInit(rec)
    return { id: rec.id, spec: rec.spec, status: rec.status, createdAt: rec.createdAt }
  }

  /** The container's init, from runc's pid file (written once the process runs). */
  private findInit(rec: ContainerRecord): ProcessId | undefined {
    if (rec.init !== undefined || rec.status.state !== "running") return rec.init
    const init = processId(Number((readText(join(this.containerDir(rec.id), "init.pid")) ?? "").trim()))
    if (init !== undefined) {
      rec.init = init
      rec.status = { ...rec.status, pid: init.pid }
      void this.save(rec)
    }
    return init
  }

  async startContainer(id: string): Promise<Runtime.Container> {
    const c = this.live(id)
    if (c.rec.status.state !== "created" || c.starting !== undefined)
      throw invalid(`container ${id} is ${c.starting ? "starting" : c.rec.status.state}; a container runs once`)
    c.starting = this.launch(c).finally(() => (c.starting = undefined))
    await c.starting
    await this.refresh(c)
    return this.view(c.rec)
  }

  private async launch(c: Live): Promise<void> {
    const rec = c.rec
    const spec = rec.spec
    const sb = this.sandboxes.get(spec.sandboxId)
    if (sb === undefined) throw invalid(`sandbox ${spec.sandboxId} is gone`)
    if (!this.ready(sb)) throw invalid(`sandbox ${sb.id} is not ready: its namespaces are gone`)
    const dir = this.containerDir(rec.id)
    try {
      rec.rootfs = await this.prepareRootfs(rec, sb.ids)
      if (sb.ids !== undefined) rec.root = await this.mountRoot(rec, sb.ids)
      // The pod's cgroup again: a closing box may have released it while it was empty.
      if (this.cg.version !== "none") await this.cg.create(sb.id, sb.spec.resources)
      const config = Oci.config({
        spec,
        rootfs: rec.root ?? join(dir, "bundle", "rootfs"),
        ...(sb.ids === undefined
          ? {}
          : { userns: { path: `/proc/${sb.holder!.pid}/ns/user`, mappings: UserNamespace.mappings(sb.ids, sb.uid) } }),
        join: { uts: `/proc/${sb.holder!.pid}/ns/uts`, ipc: `/proc/${sb.holder!.pid}/ns/ipc` },
        cgroupsPath: join(this.cgroupBase, sb.id, rec.id),
        swapLimit: this.swapLimit,
        hostFiles: this.hostFiles,
        confinement: this.confinementOf(spec)
      })
      await writeFile(join(dir, "bundle", "config.json"), JSON.stringify(config), { mode: 0o600 })
      const fifos = spawnSync(this.tools.mkfifo, ["-m", "600", join(dir, "stdout.fifo"), join(dir, "stderr.fifo")], { encoding: "utf8" })
      if (fifos.status !== 0) throw unavailable(`mkfifo: ${(fifos.stderr || fifos.error?.message || "failed").trim()}`)
    } catch (e) {
      // Nothing ran: the container stays `created`, as it was.
      await this.unmountRootfs(rec)
      throw e instanceof Runtime.Invalid || e instanceof Runtime.Unavailable ? e : unavailable(`start: ${String(e)}`)
    }
    // Recorded before the launch: a box that dies right here finds the shim through its `shim` file.
    rec.status = { state: "running", startedAt: now() }
    await this.save(rec)
    this.attach(c)
    const child = spawn(this.tools.sh, ["-c", shimScript, "kbox-runc-shim", dir, this.runcPath, this.runcRoot, rec.id], {
      detached: true,
      stdio: "ignore",
      cwd: "/",
      env: { PATH: Oci.defaultPath }
    })
    try {
      await spawned(child)
    } catch (e) {
      rec.status = { state: "exited", exitCode: 128, reason: "StartError", message: `shim: ${String(e)}`, startedAt: rec.status.startedAt!, finishedAt: now() }
      c.writer?.close()
      c.writer = undefined
      await this.unmountRootfs(rec)
      await this.save(rec)
      c.markExited()
      return
    }
    child.unref()
    const shim = processId(child.pid)
    if (shim) rec.shim = shim
    child.once("exit", () => void this.refresh(c))
    void this.save(rec)
    // Running once runc wrote the init's pid; or ended (a start error) once the shim wrote `exit`.
    const end = Date.now() + startTimeoutMs
    for (let i = 0; this.findInit(rec) === undefined && exitCodeIn(dir) === undefined && alive(rec.shim); i++) {
      if (Date.now() > end) {
        await this.runc(["delete", "--force", rec.id])
        break
      }
      await sleep(i < 50 ? 2 : 20)
    }
    // runc read the bundle's config at its start: its environment (Secret values) leaves the disk.
    await scrubEnv(join(dir, "bundle", "config.json"))
  }

  async stopContainer(id: string, gracePeriodMs: number): Promise<Runtime.Container> {
    const c = this.live(id)
    if (c.starting) await c.starting.catch(() => undefined)
    await this.refresh(c)
    if (c.rec.status.state === "created") {
      // Never started: stopping it just closes its life (as the CRI does).
      c.rec.status = { state: "exited", exitCode: 0, reason: "Completed", finishedAt: now() }
      await this.save(c.rec)
      c.markExited()
    }
    if (c.rec.status.state === "running") {
      if (gracePeriodMs > 0) await this.runc(["kill", id, String(signalNumber(signalOf(c.rec.spec.stopSignal ?? "SIGTERM") ?? "SIGTERM"))])
      if (!(await this.waitExit(c, Math.max(0, gracePeriodMs)))) await this.kill(c)
    }
    return this.view(c.rec)
  }

  /** SIGKILL the container's init (its pid namespace goes with it), then whatever is left in its cgroup. */
  private async kill(c: Live): Promise<void> {
    await this.runc(["kill", c.rec.id, "KILL"])
    if (await this.waitExit(c, 5_000)) return
    if (this.cg.version !== "none") await this.cg.killAll(`${c.rec.spec.sandboxId}/${c.rec.id}`)
    // runc itself (the shim's child) may be what is stuck: its end ends the shim, and finalizing
    // deletes the container with whatever is left of it.
    if (c.rec.shim !== undefined && alive(c.rec.shim))
      for (const pid of Procfs.children(c.rec.shim.pid)) killPid(processId(pid), "SIGKILL")
    if (!(await this.waitExit(c, 5_000))) throw unavailable(`container ${c.rec.id} did not die`)
  }

  async signalContainer(id: string, signal: string): Promise<void> {
    const c = this.live(id)
    const name = signalOf(signal)
    if (name === undefined) throw invalid(`unknown signal ${signal}`)
    await this.refresh(c)
    if (c.rec.status.state !== "running" || c.starting) throw invalid(`container ${id} is not running`)
    const r = await this.runc(["kill", id, String(signalNumber(name))])
    if (r.code !== 0) throw invalid(`container ${id} is not running (${r.stderr.trim()})`)
  }

  async execContainer(id: string, request: Runtime.ExecRequest): Promise<Runtime.ExecResult> {
    const c = this.live(id)
    const rec = c.rec
    if (rec.status.state !== "running" || c.starting) throw invalid(`container ${id} is not running`)
    if (request.command.length === 0) throw invalid("command: required")
    const dir = this.containerDir(id)
    const tag = randomBytes(4).toString("hex")
    const files = { process: join(dir, `exec-${tag}.json`), log: join(dir, `exec-${tag}.log`), pid: join(dir, `exec-${tag}.pid`) }
    const spec = Oci.processSpec(
      request.command,
      { ...rec.spec.env, ...request.env },
      request.workingDir ?? rec.spec.workingDir,
      rec.spec.user,
      this.confinementOf(rec.spec)
    )
    // Holds the environment (secrets): written private, removed after.
    await writeFile(files.process, JSON.stringify(spec), { mode: 0o600 })
    try {
      const child = spawn(
        this.runcPath,
        ["--root", this.runcRoot, "--log", files.log, "--log-format", "json", "exec", "--process", files.process, "--pid-file", files.pid, id],
        { stdio: ["pipe", "pipe", "pipe"], env: { PATH: Oci.defaultPath }, cwd: "/" }
      )
      await spawned(child).catch((e) => {
        throw unavailable(`exec: ${String(e)}`)
      })
      const out = { stdout: [] as Array<Buffer>, stderr: [] as Array<Buffer>, sizes: { stdout: 0, stderr: 0 } }
      for (const stream of ["stdout", "stderr"] as const)
        child[stream]!.on("data", (b: Buffer) => {
          if (out.sizes[stream] >= maxExecOutput) return
          out[stream].push(b)
          out.sizes[stream] += b.length
        })
      child.stdin!.on("error", () => undefined)
      child.stdin!.end(request.stdin ?? "")
      let timedOut = false
      const timer =
        request.timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              timedOut = true
              // The command and what it started (runc exec then ends with its status); runc too if it hangs.
              const pid = Number((readText(files.pid) ?? "").trim())
              if (pid > 0) for (const p of Procfs.tree(pid)) killPid(p, "SIGKILL")
              setTimeout(() => child.kill("SIGKILL"), 2_000).unref()
            }, request.timeoutMs)
      const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
        child.once("close", (code, signal) => resolve([code, signal]))
      )
      if (timer) clearTimeout(timer)
      const runcError = existsSync(files.pid) ? undefined : lastRuncError(readText(files.log))
      if (runcError !== undefined && !timedOut)
        // The command could not be run (no such file, bad working dir): the contract's 126.
        return { exitCode: 126, stdout: "", stderr: `${runcError}\n`, timedOut: false }
      return {
        exitCode: timedOut ? 137 : (code ?? 128 + (signal === null ? 9 : (signalNumber(signal) ?? 9))),
        stdout: Buffer.concat(out.stdout).toString("utf8"),
        stderr: Buffer.concat(out.stderr).toString("utf8"),
        timedOut
      }
    } finally {
      for (const f of Object.values(files)) void rm(f, { force: true }).catch(() => undefined)
    }
  }

  async removeContainer(id: string): Promise<void> {
    const c = this.containers.get(id)
    if (c === undefined) return
    if (c.starting) await c.starting.catch(() => undefined)
    await this.refresh(c)
    if (c.rec.status.state === "running") await this.kill(c)
    if (c.finalizing) await c.finalizing
    c.writer?.close()
    c.watcher?.close()
    await this.saving.get(id)
    this.containers.delete(id)
    await this.runc(["delete", "--force", id])
    await this.unmountRootfs(c.rec)
    this.removeCgroups(`${c.rec.spec.sandboxId}/${id}`)
    const dir = this.containerDir(id)
    // Never delete through a mount (an overlay that would not unmount): keep the directory instead.
    if (mountPoints().has(join(dir, "bundle", "rootfs"))) throw unavailable(`container ${id}: its rootfs is still mounted`)
    rmSync(dir, { recursive: true, force: true })
  }

  async listContainers(filter?: Runtime.ContainerFilter): Promise<Array<Runtime.Container>> {
    await Promise.all([...this.containers.values()].map((c) => this.refresh(c)))
    return [...this.containers.values()].map((c) => this.view(c.rec)).filter((c) => Runtime.matchesContainer(c, filter))
  }

  async inspectContainer(id: string): Promise<Runtime.Container> {
    const c = this.live(id)
    await this.refresh(c)
    return this.view(c.rec)
  }

  logs(id: string, options: Runtime.LogOptions = {}): Stream.Stream<Runtime.LogChunk, Runtime.NotFound> {
    return Stream.unwrap(
      Effect.sync(() => {
        const c = this.containers.get(id)
        if (c === undefined) return Stream.fail(notFound("container", id))
        const timestamps = options.timestamps === true
        const dir = this.containerDir(id)
        return Stream.asyncPush<Runtime.LogChunk>((emit) =>
          Effect.acquireRelease(
            Effect.sync(() => {
              // Read the file and subscribe in one synchronous step: no line falls in between.
              for (const l of ContainerLogs.read(dir, this.rotation, options, Date.now()))
                emit.single(ContainerLogs.toChunk(l, timestamps))
              if (options.follow !== true || c.rec.status.state !== "running" || c.writer === undefined) {
                emit.end()
                return () => {}
              }
              const unlisten = c.writer.listen((l) => emit.single(ContainerLogs.toChunk(l, timestamps)))
              void c.exited.then(() => emit.end())
              return unlisten
            }),
            (unlisten) => Effect.sync(unlisten)
          )
        )
      })
    )
  }

  statsOf(id: string): Runtime.Stats {
    const c = this.live(id)
    const rec = c.rec
    if (rec.status.state !== "running") throw invalid(`container ${id} is not running`)
    const at = Date.now()
    let cpuNanos = 0
    let workingSet = 0
    let rss = 0
    let limit: number | undefined
    let pids = 0
    const sample = this.cg.sample(`${rec.spec.sandboxId}/${rec.id}`)
    if (sample) {
      cpuNanos = sample.cpuNanos
      workingSet = sample.workingSetBytes
      rss = sample.rssBytes
      limit = sample.memoryLimitBytes
      pids = sample.pids
    } else {
      const init = this.findInit(rec)
      const procs = init ? Procfs.tree(init.pid) : []
      for (const p of procs) {
        cpuNanos += ((p.utime + p.stime) * 1e9) / Procfs.clockTicksPerSecond
        rss += p.rssPages * Procfs.pageSize
      }
      workingSet = rss
      pids = procs.length
    }
    const since = c.lastCpu ?? { nanos: 0, at: Date.parse(rec.status.startedAt ?? new Date(at).toISOString()) }
    const seconds = Math.max(0.001, (at - since.at) / 1000)
    c.lastCpu = { nanos: cpuNanos, at }
    return {
      timestamp: new Date(at).toISOString(),
      cpu: { usageCoreNanoSeconds: cpuNanos, usageNanoCores: Math.max(0, Math.round((cpuNanos - since.nanos) / seconds)) },
      memory: { workingSetBytes: workingSet, rssBytes: rss, ...(limit === undefined ? {} : { limitBytes: limit }) },
      pids
    }
  }

  async processesOf(id: string): Promise<Array<Runtime.Process>> {
    const rec = this.live(id).rec
    if (rec.status.state !== "running") return []
    let pids: ReadonlyArray<number> = this.cg.version === "none" ? [] : this.cg.pids(`${rec.spec.sandboxId}/${rec.id}`)
    if (this.cg.version === "none") {
      const r = await this.runc(["ps", "--format", "json", id])
      pids = r.code === 0 ? ((JSON.parse(r.stdout.trim() || "[]") ?? []) as Array<number>) : []
    }
    const out: Array<Runtime.Process> = []
    for (const pid of pids) {
      const s = Procfs.stat(pid)
      if (s === undefined || s.state === "Z") continue
      out.push({ pid, ppid: s.ppid, command: s.comm, args: Procfs.cmdline(pid), rssBytes: s.rssPages * Procfs.pageSize, state: s.state })
    }
    return out
  }
}

const isRuntimeError = (e: unknown): e is Runtime.RuntimeError =>
  e instanceof Runtime.NotFound ||
  e instanceof Runtime.AlreadyExists ||
  e instanceof Runtime.Invalid ||
  e instanceof Runtime.Unavailable ||
  e instanceof Runtime.Unsupported

/** Run a driver call as an Effect; anything unexpected it throws is `Unavailable`. */
const call = <A, E extends Runtime.RuntimeError>(f: () => A | Promise<A>): Effect.Effect<A, E> =>
  Effect.tryPromise({
    try: async () => f(),
    catch: (e) => (isRuntimeError(e) ? e : unavailable(e instanceof Error ? e.message : String(e))) as E
  })

/** The driver as core's Runtime service. */
export const toRuntime = (d: RuncDriver): Runtime.RuntimeService => ({
  info: Effect.succeed(d.info),
  sandboxes: {
    create: (spec) => call(() => d.createSandbox(spec)),
    get: (id) => call(() => d.getSandbox(id)),
    list: (filter) => call(() => d.listSandboxes(filter)),
    remove: (id) => call(() => d.removeSandbox(id))
  },
  containers: {
    create: (spec) => call(() => d.createContainer(spec).then((c) => c.id)),
    start: (id) => call(() => d.startContainer(id).then(() => undefined)),
    stop: (id, { gracePeriodMs }) => call(() => d.stopContainer(id, gracePeriodMs).then((c) => c.status)),
    signal: (id, signal) => call(() => d.signalContainer(id, signal)),
    exec: (id, request) => call(() => d.execContainer(id, request)),
    remove: (id) => call(() => d.removeContainer(id)),
    list: (filter) => call(() => d.listContainers(filter)),
    inspect: (id) => call(() => d.inspectContainer(id)),
    logs: (id, options) => d.logs(id, options),
    stats: (id) => call(() => d.statsOf(id)),
    processes: (id) => call(() => d.processesOf(id)),
    // runc containers share the host's network here: there is no pod namespace to enforce a policy in.
    applyNetworkPolicy: (id) =>
      call(async () => {
        await d.inspectContainer(id)
        throw new Runtime.Unsupported({ message: "network-policy: the runc driver has no pod network namespaces" })
      })
  },
  images: toImages(d.images)
})

/** Open the runc driver on a data dir (lock, load, re-adopt) as a Runtime service. */
export const open = (options: Options): Handle => {
  const driver = RuncDriver.open(options)
  if (!driver.userns.enabled) console.warn(`koder-fleet box: runc pods get no user namespace: ${driver.userns.reason}`)
  return { runtime: toRuntime(driver), info: driver.info, userns: driver.userns, close: () => driver.close() }
}
