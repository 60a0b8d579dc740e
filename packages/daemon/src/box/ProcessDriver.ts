/**
 * The box's `process` driver: containers are supervised host processes. It implements core's
 * Runtime port directly, so the kbox HTTP server serves it and `koder-fleet dev` can embed it.
 *
 *   create ─▶ state.json (created)
 *   start  ─▶ cgroup + limits ─▶ shim (sh, detached, outlives the box) ─▶ setsid ─▶ [nsenter] ─▶ [setpriv] ─▶ argv
 *            shim: FIFOs ─▶ box Writer ─▶ container.log (CRI lines, rotated); `pid`, `exit` files
 *   exit   ─▶ (shim exit event | FIFO end of file | 1 s poll) ─▶ kill leftovers ─▶ drain logs ─▶ state.json (exited)
 *   restart of the box ─▶ load state.json files ─▶ live shims (pid + start time) are re-adopted,
 *            dead ones are finalized from their `exit` file; nothing is started twice.
 *
 * When root (and unless told otherwise) each sandbox gets pid, mount, uts and ipc namespaces
 * held by a small holder process (pid 1 of the pod), and each container a cgroup with its
 * limits under the pod's. Unprivileged, containers are plain process sessions.
 */
import { Runtime } from "@koder/fleet-core"
import { Effect, Either, Stream } from "effect"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import {
  copyFileSync,
  createReadStream,
  existsSync,
  mkdirSync,
  lstatSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  watch,
  writeFileSync
} from "node:fs"
import type { FSWatcher } from "node:fs"
import { rename, unlink, writeFile } from "node:fs/promises"
import { constants as osConstants } from "node:os"
import { join } from "node:path"
import { privateDirSync } from "../internal/files.js"
import * as Cgroups from "./Cgroups.js"
import * as Confinement from "./Confinement.js"
import * as EnvSeal from "./EnvSeal.js"
import { IpamStore } from "./Ipam.js"
import * as Nftables from "./Nftables.js"
import * as NetworkPolicyEnforcer from "./NetworkPolicyEnforcer.js"
import { PodNetwork } from "./PodNetwork.js"
import * as PodNetworks from "./PodNetwork.js"
import * as ContainerLogs from "./ContainerLogs.js"
import { FifoPool } from "./FifoPool.js"
import { Launcher } from "./Launcher.js"
import * as Procfs from "./Procfs.js"
import * as NativeShim from "./NativeShim.js"
import * as NodeHiding from "./NodeHiding.js"
import * as Shim from "./Shim.js"
import type * as ShimFlag from "./ShimFlag.js"
import { defaultPath, which } from "./Tools.js"

/** How the driver is set up. */
export interface Options {
  readonly dataDir: string
  /** `auto` (default): namespaces when root and unshare/nsenter exist; `none`: never. */
  readonly isolation?: "auto" | "none"
  /** `auto` (default): cgroups when root and mounted; `none`: never (limits ignored). */
  readonly cgroups?: "auto" | "none"
  readonly logRotation?: ContainerLogs.Rotation
  /** Liveness poll of running containers, for exits no event reported (default 1000 ms). */
  readonly pollIntervalMs?: number
  /** The bridge pods with their own network attach to (default `fleet0`). */
  readonly bridge?: string
  /**
   * `auto` (default): start containers and pod holders with the native shim when the machine can
   * build it (NativeShim.ts), else the sh chain; `sh`: always the sh chain.
   */
  readonly shim?: ShimFlag.Shim
  /**
   * Directories pods must not see besides the box's own (its data dir and run directory): its
   * socket's, the server's and the agent's data dirs (NodeHiding.ts). Covered in every pod's
   * mount namespace when the box isolates pods.
   */
  readonly hide?: ReadonlyArray<string>
}

/** What the driver reports as its version. */
export const version = "0.1.0"

/** Output of an exec kept per stream; more is cut (an exec is a probe or a command, not a pipe). */
const maxExecOutput = 4 * 1024 * 1024

interface ProcessId {
  readonly pid: number
  readonly startTime: number
}

interface SandboxRecord {
  readonly id: string
  readonly spec: Runtime.SandboxSpec
  readonly createdAt: string
  readonly bootId: string
  /**
   * The pod's namespaces: the process that made them (`unshare`) and the holder, pid 1 inside (with
   * the sh chain unshare's child; the native holder is both).
   */
  holder?: { readonly unshare: ProcessId; readonly pid: number; readonly startTime: number }
  /** Container paths already bind-mounted in the pod's mount namespace. */
  mounts: Array<string>
  /** `network: pod`: its address, from the node's pod CIDR (the holder holds its network namespace). */
  network?: { readonly ip: string; readonly cidr: string }
  /** The uid its containers run as when they name none (Confinement.uidRange; root boxes only). */
  uid?: number
  /** The directories covered in its mount namespace (NodeHiding.ts), once they are. */
  hidden?: ReadonlyArray<string>
}

interface ContainerRecord {
  readonly id: string
  readonly spec: Runtime.ContainerSpec
  readonly createdAt: string
  readonly bootId: string
  status: Runtime.ContainerStatus
  /** Placed in a cgroup (`<sandbox>/<container>`). */
  cgroup: boolean
  shim?: ProcessId
  /** The session leader the shim launched (setsid); nsenter when isolated. */
  launcher?: ProcessId
  /** The workload's main process: what signals go to (found lazily when isolated). */
  main?: ProcessId
  /**
   * Launched through nsenter (the launcher is then not the main process but its parent): the sh
   * chain into a pod's namespaces. The native shim starts the main process itself.
   */
  isolated?: boolean
  /**
   * The directory of the shim's files: the FIFOs, `pid`, `start-error` and `exit` (in the box's
   * run directory; absent, as in records from before it, the container's own directory).
   */
  runDir?: string
}

/** A container's live bookkeeping beside its record. */
interface Live {
  rec: ContainerRecord
  writer: ContainerLogs.Writer | undefined
  /** Watches the container's run directory for the shim's `exit` file. */
  watcher: FSWatcher | undefined
  starting: Promise<void> | undefined
  finalizing: Promise<void> | undefined
  exited: Promise<void>
  markExited: () => void
  lastCpu: { readonly nanos: number; readonly at: number } | undefined
  /** The box itself SIGKILLed the container: a 137 is then not the OOM killer's. */
  killedByBox: boolean
}

const now = () => new Date().toISOString()
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
const newId = () => randomBytes(8).toString("hex")

const notFound = (kind: Runtime.ObjectKind, id: string) =>
  new Runtime.NotFound({ kind, id, message: `${kind} ${id} not found` })
const invalid = (message: string) => new Runtime.Invalid({ message })


/** Does this nsenter have `--wdns` (util-linux 2.38)? Without it, stage 2 enters working directories. */
const nsenterEntersWorkingDirs = (nsenter: string | undefined): boolean =>
  nsenter !== undefined && spawnSync(nsenter, ["--help"], { encoding: "utf8" }).stdout?.includes("--wdns") === true

/** Can this env put ignored signals back to their default (`--default-signal`, coreutils 8.31)? */
const envRestoresSignals = (env: string): boolean => spawnSync(env, ["--default-signal=INT,QUIT", "true"]).status === 0

/** The names of this user's run directories in /dev/shm start so. */
const runDirPrefix = `kbox-${process.getuid?.() ?? 0}-`

/**
 * The run directory of the box serving `dataDir`, in /dev/shm when it is there (containerd's
 * `/run` state beside its `/var/lib` root): one per data dir, kept across restarts of the box
 * (the shims of the containers it adopts write there) but not of the host, like the processes
 * it describes. Memory: the secrets of launch files never reach a disk, and the files made and
 * removed with every container (FIFOs, pid, exit) cost no disk inode allocation, which on a disk
 * that has just removed many files is slow enough to be a large part of a pod start.
 */
const runDirFor = (dataDir: string): string | undefined => {
  const dir = privateDirSync(join("/dev/shm", `${runDirPrefix}${createHash("sha256").update(dataDir).digest("hex").slice(0, 12)}`))
  if (dir === undefined) return undefined
  try {
    // Which data dir it serves, so a box can tell an orphan (see sweepRunDirs).
    if (readText(join(dir, "data-dir")) !== dataDir) writeFileSync(join(dir, "data-dir"), dataDir, { mode: 0o600 })
    return dir
  } catch {
    return undefined
  }
}

/**
 * Remove this user's run directories whose data dir is gone: no box can adopt their containers
 * any more (a box killed, then its data dir removed, as tests and throwaway clusters do), and a
 * run directory otherwise outlives them until the host restarts.
 */
const sweepRunDirs = () => {
  try {
    for (const name of readdirSync("/dev/shm")) {
      if (!name.startsWith(runDirPrefix)) continue
      const dir = join("/dev/shm", name)
      const dataDir = readText(join(dir, "data-dir"))
      if (dataDir !== undefined && dataDir !== "" && !existsSync(dataDir) && privateDirSync(dir) !== undefined) rmSync(dir, { recursive: true, force: true })
    }
  } catch {
    // no /dev/shm: nothing to sweep
  }
}

/** The run directory's launch directory, emptied of what a previous box left. */
const launchDirIn = (runDir: string): string | undefined => {
  const dir = privateDirSync(join(runDir, "launch"))
  if (dir === undefined) return undefined
  try {
    for (const name of readdirSync(dir)) rmSync(join(dir, name), { force: true })
    return dir
  } catch {
    return undefined
  }
}

// Temporary siblings are named by this process and a counter: one box per data dir (its lock),
// and no random bytes to draw for each of a pod start's several writes.
let tmpSeq = 0
const tmpOf = (path: string) => `${path}.${process.pid}-${(tmpSeq++).toString(36)}.tmp`

/** Write a file atomically (sibling, then rename): a crash never leaves half a record. */
const writeTextSync = (path: string, text: string) => {
  const tmp = tmpOf(path)
  writeFileSync(tmp, text, { mode: 0o600 })
  renameSync(tmp, path)
}

const writeJson = (path: string, value: unknown) => writeTextSync(path, JSON.stringify(value))

/** The same, off the event loop. */
const writeAtomic = async (path: string, text: string) => {
  const tmp = tmpOf(path)
  await writeFile(tmp, text, { mode: 0o600 })
  await rename(tmp, path)
}

/** One write(2) of at most a page at offset 0 is never torn by the writer dying part way. */
const pageBytes = 4096

/**
 * Write a record file (JSON); returns its size now. Records of a page or less are written on the
 * calling thread: a write of a few hundred bytes into the page cache costs less than the thread
 * pool's open, write and close round trips, each a wake-up of another thread (interleaved bursts
 * of 100 pod starts: p99 1.09–1.12 s against 1.38–1.51 s, V8's and libuv's threads' CPU 0.65–0.86
 * s against 0.97–1.18 s, in 3 of 4 pairs; the 4th was noise). A file this box wrote
 * before (`size` known) is rewritten in place, in one write of the text padded with spaces to the
 * file's size (JSON ignores trailing whitespace), so it always holds one whole record, the old or
 * the new; a new file is created with the text. Only a record larger than a page, or a file of
 * unknown size (one a previous box wrote), goes through a temporary sibling and a rename. Why:
 * creating files is what a pod start spent most on here (ext4 without a journal checks each new
 * inode against the recently deleted ones, and every rename over a record deletes one).
 */
const writeRecord = async (path: string, text: string, size: number | undefined): Promise<number> => {
  const bytes = Buffer.byteLength(text)
  if (size !== undefined && Math.max(size, bytes) <= pageBytes) {
    writeFileSync(path, size > bytes ? text + " ".repeat(size - bytes) : text, { flag: "r+" })
    return Math.max(size, bytes)
  }
  if (size === undefined && bytes <= pageBytes) {
    try {
      writeFileSync(path, text, { flag: "wx", mode: 0o600 })
      return bytes
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
    }
  }
  await writeAtomic(path, text)
  return bytes
}

const readText = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}

/**
 * The exit status the shim recorded, once complete: it writes "<code>\n" in one write, but the
 * file exists (empty) a moment before, and a watcher can see it then.
 */
const exitCodeIn = (dir: string): number | undefined => {
  const file = join(dir, "exit")
  // Asked of every running container each second: an existence check is cheaper than the error of
  // reading a file that is not there.
  if (!existsSync(file)) return undefined
  const m = /^(\d+)\n$/.exec(readText(file) ?? "")
  return m ? Number(m[1]) : undefined
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

const kill = (p: ProcessId | undefined, signal: NodeJS.Signals | number) => {
  if (p === undefined || !Procfs.isAlive(p.pid, p.startTime)) return false
  try {
    process.kill(p.pid, signal)
    return true
  } catch {
    return false
  }
}

const processId = (pid: number | undefined): ProcessId | undefined => {
  if (pid === undefined) return undefined
  const s = Procfs.stat(pid)
  return s === undefined ? undefined : { pid, startTime: s.startTime }
}

/** The process driver. Open it with `open`; it adopts what a previous box left running. */
export class ProcessDriver {
  readonly info: Runtime.Info
  private readonly tools: Shim.Tools
  /** How containers start: `native`, or `sh` and why (for the box's start-up line). */
  readonly shim: string
  private readonly cg: Cgroups.Cgroups
  private readonly isolated: boolean
  private readonly rotation: ContainerLogs.Rotation
  private readonly sandboxes = new Map<string, SandboxRecord>()
  private readonly containers = new Map<string, Live>()
  private readonly bootId = Procfs.bootId()
  private poller: NodeJS.Timeout | undefined
  private closed = false
  private readonly launcher: Launcher
  /** Records being written, by path: the newest text not yet on disk, and when it will be. */
  private readonly writing = new Map<string, { text: string | undefined; readonly done: Promise<void> }>()
  /** Sizes of the record files this box wrote (rewritten in place: see writeRecord). */
  private readonly recordSizes = new Map<string, number>()
  /** When a view last looked for a container's main process (until it is found). */
  private readonly mainLookedUp = new Map<string, number>()
  /** Pods whose cgroup this box created (a pod it adopted may have lost its cgroup: see launch). */
  private readonly podCgroups = new Set<string>()
  /** The box's run directory (see `runDirFor`); undefined: containers' own directories. */
  private runDir: string | undefined
  /**
   * Where launch files (a container's environment: secrets) are written for the moment of a start:
   * in the run directory's `launch/`, else the container's own shim directory.
   */
  private launchDir: string | undefined
  /** FIFOs made ahead for containers' output (set once the data dir is locked). */
  private fifos: FifoPool | undefined
  /** The holder launch file, with and without a network namespace, once this box made sure it exists. */
  private readonly holderFiles = new Map<boolean, string>()
  /** Pod networks (isolated, with iproute2): the bridge and veths, and the persisted IPAM. */
  private readonly podNet: PodNetwork | undefined
  private ipam: IpamStore | undefined
  /** Seals containers' environments in their records (EnvSeal: no Secret value on disk in the clear). */
  private envSeal: EnvSeal.EnvSeal = EnvSeal.make(randomBytes(32))
  /** Each container's sealed environment, sealed once at its create (or its load). */
  private readonly sealedEnvs = new Map<string, string>()

  private constructor(private readonly options: Options) {
    const root = process.getuid?.() === 0
    const env = which("env") ?? "/usr/bin/env"
    const nsenter = which("nsenter")
    this.tools = {
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
    if (options.shim !== "sh") {
      const native = NativeShim.find(options.dataDir)
      if ("path" in native) this.tools = { ...this.tools, native: native.path }
      this.shim = "path" in native ? "native" : `sh (no native shim: ${native.reason})`
    } else this.shim = "sh"
    this.isolated =
      options.isolation !== "none" && root && this.tools.nsenter !== undefined && this.tools.unshare !== undefined
    this.cg = options.cgroups === "none" ? Cgroups.none : Cgroups.detect(options.dataDir)
    this.launcher = new Launcher(this.tools.sh, this.tools.native)
    this.rotation = options.logRotation ?? { maxBytes: 10 * 1024 * 1024, maxFiles: 2 }
    this.podNet = this.isolated && PodNetworks.available() ? new PodNetwork(options.bridge) : undefined
    this.info = {
      name: "koder-fleet-box",
      version,
      driver: "process",
      capabilities: {
        isolation: this.isolated ? "namespaces" : "none",
        // `net` for sandboxes asking `network: pod`.
        namespaces: this.isolated ? ["pid", "mount", "uts", "ipc", ...(this.podNet === undefined ? [] : ["net" as const])] : [],
        cgroups: this.cg.version,
        limits: this.cg.limits,
        bindMounts: this.isolated,
        runAsUser: root && this.tools.setpriv !== undefined,
        podNetwork: this.podNet !== undefined,
        checkpoint: false,
        // Enforced by nftables inside each pod network namespace.
        networkPolicy: this.podNet !== undefined && Nftables.nft() !== undefined,
        drivers: ["process"]
      }
    }
  }

  /** Open the data dir: take its lock, load and re-adopt its sandboxes and containers. */
  static open(options: Options): ProcessDriver {
    const d = new ProcessDriver(options)
    d.lock()
    sweepRunDirs()
    d.runDir = runDirFor(options.dataDir)
    d.launchDir = d.runDir === undefined ? undefined : launchDirIn(d.runDir)
    // The key in memory (/dev/shm) when there is a run directory: the disk alone never opens a record.
    d.envSeal = EnvSeal.load(d.runDir ?? options.dataDir)
    // In the run directory when there is one: a FIFO moves into a container's by a rename.
    d.fifos = new FifoPool(join(d.runDir ?? options.dataDir, "fifos"), d.tools.mkfifo, d.launcher, d.launchDir ?? options.dataDir)
    d.load()
    // Addresses of sandboxes this box no longer has (it died between the two) are free again.
    if (d.podNet !== undefined) d.ipam = IpamStore.open(options.dataDir, new Set(d.sandboxes.keys()))
    d.poller = setInterval(() => d.pollAll(), options.pollIntervalMs ?? 1000)
    d.poller.unref()
    return d
  }

  private get dataDir() {
    return this.options.dataDir
  }

  private containerDir(id: string) {
    return join(this.dataDir, "containers", id)
  }

  private shimDir(rec: ContainerRecord) {
    return rec.runDir ?? this.containerDir(rec.id)
  }

  /** One box per data dir: two would each adopt, and then duplicate, the same containers. */
  private lock() {
    mkdirSync(join(this.dataDir, "containers"), { recursive: true, mode: 0o700 })
    mkdirSync(join(this.dataDir, "sandboxes"), { recursive: true, mode: 0o700 })
    const file = join(this.dataDir, "box.pid")
    const [pid, start] = (readText(file) ?? "").trim().split(" ").map(Number)
    if (pid !== undefined && pid !== process.pid && Procfs.isAlive(pid, start))
      throw new Runtime.Unavailable({ message: `another box (pid ${pid}) serves ${this.dataDir}` })
    const self = Procfs.stat(process.pid)
    const tmp = `${file}.${process.pid}.tmp`
    writeFileSync(tmp, `${process.pid} ${self?.startTime ?? 0}\n`, { mode: 0o600 })
    renameSync(tmp, file)
  }

  /** Stop watching (containers keep running: the next box adopts them). */
  close(): void {
    this.closed = true
    if (this.poller) clearInterval(this.poller)
    this.launcher.close()
    if (this.launchDir !== undefined) rmSync(this.launchDir, { recursive: true, force: true })
    this.fifos?.close()
    // The run directory stays while containers have files there (the next box adopts them).
    if (this.runDir !== undefined) {
      rmSync(join(this.runDir, "idle.fifo"), { force: true })
      try {
        if (readdirSync(this.runDir).every((name) => name === "data-dir" || name === EnvSeal.keyFile)) rmSync(this.runDir, { recursive: true, force: true })
      } catch {
        // gone already
      }
    }
    for (const c of this.containers.values()) {
      c.writer?.close()
      c.writer = undefined
      c.watcher?.close()
      c.watcher = undefined
    }
    // Pods' cgroups stay while they have processes; an empty base is not left behind.
    this.cg.release()
    const file = join(this.dataDir, "box.pid")
    if ((readText(file) ?? "").startsWith(`${process.pid} `)) rmSync(file, { force: true })
  }

  // ---------------------------------------------------------------------------------------------
  // Adoption
  // ---------------------------------------------------------------------------------------------

  private load() {
    for (const name of readdirSync(join(this.dataDir, "sandboxes"))) {
      if (!name.endsWith(".json")) continue
      try {
        const rec = JSON.parse(readFileSync(join(this.dataDir, "sandboxes", name), "utf8")) as SandboxRecord
        this.sandboxes.set(rec.id, rec)
      } catch {
        // a torn write cannot happen (rename); anything else unreadable is skipped
      }
    }
    for (const id of readdirSync(join(this.dataDir, "containers"))) {
      const text = readText(join(this.containerDir(id), "state.json"))
      if (text === undefined) continue
      let rec: ContainerRecord
      let envLost = false
      try {
        const opened = EnvSeal.fromDisk(JSON.parse(text) as ContainerRecord & { sealedEnv?: string }, this.envSeal)
        rec = opened.rec
        envLost = !opened.ok
        if (opened.sealed !== undefined) this.sealedEnvs.set(rec.id, opened.sealed)
      } catch {
        continue
      }
      const live = this.track(rec)
      if (rec.status.state === "created" && envLost) {
        // Its environment went with the key (the host restarted): it cannot start as it was made.
        rec.status = this.lost(rec, "its environment could not be recovered (the box's key is gone)")
        void this.save(rec)
      }
      if (rec.status.state !== "running") {
        if (rec.status.state === "exited") live.markExited()
        continue
      }
      if (rec.bootId !== this.bootId) {
        // The host rebooted: nothing of it survives, and its exit status is gone with it.
        rec.status = this.lost(rec, "the host restarted")
        void this.save(rec)
        live.markExited()
        continue
      }
      if (rec.isolated === undefined) rec.isolated = this.sandboxes.get(rec.spec.sandboxId)?.holder !== undefined
      if (rec.shim === undefined) {
        // The box stopped between recording the start and recording the shim: the shim writes
        // its own pid, so find it there.
        const [shimPid, launched] = (readText(join(this.shimDir(rec), "pid")) ?? "").trim().split(" ").map(Number)
        const shim = processId(shimPid)
        if (shim) rec.shim = shim
        const launcher = processId(launched)
        if (launcher) rec.launcher = launcher
      }
      if (rec.shim !== undefined && Procfs.isAlive(rec.shim.pid, rec.shim.startTime)) {
        this.attachLogs(live)
      } else {
        void this.refresh(live)
      }
    }
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
      lastCpu: undefined,
      killedByBox: false
    }
    this.containers.set(rec.id, live)
    return live
  }

  /**
   * Write a record atomically (see writeRecord), one write at a time per path, with the record as
   * it was when `persist` was called; the promise settles once that text (or a newer one) is on
   * disk. Records asked for while a write is in flight (a record over a page goes through the
   * thread pool) are not all written: only the newest, after it.
   */
  private persist(path: string, text: string): Promise<void> {
    const pending = this.writing.get(path)
    if (pending !== undefined) {
      pending.text = text
      return pending.done
    }
    const slot: { text: string | undefined; done: Promise<void> } = { text, done: Promise.resolve() }
    this.writing.set(path, slot)
    slot.done = (async () => {
      while (slot.text !== undefined) {
        const next = slot.text
        slot.text = undefined
        try {
          this.recordSizes.set(path, await writeRecord(path, next, this.recordSizes.get(path)))
        } catch {
          // The record was removed meanwhile (its directory is gone): nothing to keep.
          this.recordSizes.delete(path)
        }
      }
      this.writing.delete(path)
    })()
    return slot.done
  }

  /** Persist a container's record; callers await it where it must be on disk before they go on. */
  private save(rec: ContainerRecord): Promise<void> {
    return this.persist(join(this.containerDir(rec.id), "state.json"), JSON.stringify(EnvSeal.toDisk(rec, this.sealedEnvOf(rec))))
  }

  /** The container's environment sealed (once: its records are written several times a start). */
  private sealedEnvOf(rec: ContainerRecord): string | undefined {
    const env = rec.spec.env
    if (env === undefined || Object.keys(env).length === 0) return undefined
    let sealed = this.sealedEnvs.get(rec.id)
    if (sealed === undefined) {
      sealed = this.envSeal.seal(env)
      this.sealedEnvs.set(rec.id, sealed)
    }
    return sealed
  }

  private saveSandbox(rec: SandboxRecord): Promise<void> {
    return this.persist(join(this.dataDir, "sandboxes", `${rec.id}.json`), JSON.stringify(rec))
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
    if (c.rec.status.state !== "running" || c.starting !== undefined) return Promise.resolve()
    const dir = this.shimDir(c.rec)
    const done =
      exitCodeIn(dir) !== undefined || c.rec.shim === undefined || !Procfs.isAlive(c.rec.shim.pid, c.rec.shim.startTime)
    if (!done) return Promise.resolve()
    c.finalizing = this.finalize(c).finally(() => (c.finalizing = undefined))
    return c.finalizing
  }

  /** Record how the container ended; leave no process and no unread output behind. */
  private async finalize(c: Live): Promise<void> {
    const rec = c.rec
    const dir = this.shimDir(rec)
    const exitFile = join(dir, "exit")
    // The shim writes `exit` just before it ends: give a shim that is exiting a moment.
    for (let i = 0; i < 50 && exitCodeIn(dir) === undefined && rec.shim && Procfs.isAlive(rec.shim.pid, rec.shim.startTime); i++)
      await sleep(10)
    const code = exitCodeIn(dir)
    // The main process is gone; whatever it left running goes with it (a container is its tree).
    await this.killTree(rec)
    if (c.writer) {
      // Every writer is gone now: take the rest of the output from the pipes and end the log.
      c.writer.drainNow()
      c.writer.close()
      c.writer = undefined
    }
    c.watcher?.close()
    c.watcher = undefined
    const startError = readText(join(dir, "start-error"))?.trim()
    const path = `${rec.spec.sandboxId}/${rec.id}`
    // The OOM killer's SIGKILL, not the box's (stop, remove, or a SIGKILL asked through `signal`).
    const oom = rec.cgroup && !c.killedByBox && this.cg.oomKilled(path)
    let finishedAt = now()
    try {
      finishedAt = statSync(exitFile).mtime.toISOString()
    } catch {
      // no exit file: now
    }
    const startedAt = rec.status.startedAt === undefined ? {} : { startedAt: rec.status.startedAt }
    if (code === undefined && rec.launcher === undefined)
      rec.status = { state: "exited", exitCode: 128, reason: "StartError", message: "the shim could not launch the process", ...startedAt, finishedAt }
    else if (code === undefined) rec.status = this.lost(rec, "the shim ended without recording it")
    else if (startError !== undefined && startError !== "")
      rec.status = { state: "exited", exitCode: code, reason: "StartError", message: startError, ...startedAt, finishedAt }
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
    delete rec.main
    await this.save(rec)
    if (rec.cgroup) this.cg.remove(path)
    c.markExited()
  }

  /**
   * SIGKILL every process of a container: its cgroup, and its session and descendants. The
   * launcher goes last: isolated, it is nsenter, the parent (outside the pod's pid namespace) of
   * the workload inside it. Killed together, the workload's zombie would be handed to the host's
   * init instead of the pod's, and the pod's namespace could not end until the host reaped it.
   * Killed first, the workload is reaped by nsenter, which then exits by itself.
   */
  private async killTree(rec: ContainerRecord): Promise<void> {
    const spare = rec.isolated === true ? rec.launcher : undefined
    const spared = (pid: number) => spare !== undefined && pid === spare.pid
    const path = `${rec.spec.sandboxId}/${rec.id}`
    const root = rec.launcher?.pid ?? rec.main?.pid
    // With a cgroup, it holds every process of the container (they join it before they exec):
    // no need to scan /proc. Without, the session and the descendants of the launcher.
    const others = () =>
      rec.cgroup ? this.cg.killAll(path, 5_000, spared) : killProcesses(() => (root === undefined ? [] : Procfs.tree(root).filter((s) => s.pid !== rec.shim?.pid && !spared(s.pid))))
    await others()
    if (spare !== undefined) {
      for (let i = 0; i < 100 && Procfs.isAlive(spare.pid, spare.startTime); i++) await sleep(5)
      kill(spare, "SIGKILL")
      if (rec.cgroup) await this.cg.killAll(path)
      else if (root !== undefined) await killProcesses(() => Procfs.tree(root).filter((s) => s.pid !== rec.shim?.pid))
    }
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

  /**
   * Follow a running container: read its output, and watch for its `exit` file (the shim is
   * not the box's child, so no exit event comes; the FIFOs' end of file does not always either).
   */
  private attachLogs(c: Live) {
    const dir = this.shimDir(c.rec)
    try {
      c.watcher = watch(dir, (_event, name) => {
        if (name === "exit") void this.refresh(c)
      })
      c.watcher.on("error", () => undefined)
    } catch {
      // the 1 s poll remains
    }
    // Attached before the launch (FIFOs from the pool): the exit file ends it, with finalize's drain.
    if (c.writer !== undefined) {
      if (existsSync(join(dir, "exit"))) void this.refresh(c)
      return
    }
    if (!existsSync(join(dir, "stdout.fifo")) || !existsSync(join(dir, "stderr.fifo"))) return
    const writer = new ContainerLogs.Writer(this.containerDir(c.rec.id), this.rotation, dir)
    c.writer = writer
    // Both FIFOs at end of file: the shim (and everything holding them) has ended.
    void writer.attach().then(() => this.refresh(c))
    // It may have ended before the watch began.
    if (existsSync(join(dir, "exit"))) void this.refresh(c)
  }

  // ---------------------------------------------------------------------------------------------
  // Sandboxes
  // ---------------------------------------------------------------------------------------------

  private sandboxOf(rec: SandboxRecord): Runtime.Sandbox {
    const ready =
      rec.holder === undefined ||
      (rec.bootId === this.bootId && Procfs.isAlive(rec.holder.pid, rec.holder.startTime))
    return { id: rec.id, spec: rec.spec, state: ready ? "ready" : "notready", ...(rec.network === undefined ? {} : { ip: rec.network.ip }), ...(rec.uid === undefined ? {} : { uid: rec.uid }), createdAt: rec.createdAt }
  }

  async createSandbox(spec: Runtime.SandboxSpec): Promise<Runtime.Sandbox> {
    for (const s of this.sandboxes.values())
      if (s.spec.podUid === spec.podUid)
        throw new Runtime.AlreadyExists({ kind: "sandbox", id: s.id, message: `pod ${spec.podUid} already has sandbox ${s.id}` })
    const podNetwork = spec.network === "pod"
    if (podNetwork && this.podNet === undefined)
      throw invalid("network: this box has no pod networking (capabilities.podNetwork is false: it needs root, namespaces and iproute2); use host")
    if (podNetwork && spec.podCidr === undefined) throw invalid("podCidr: required with network pod (the node's spec.podCIDR)")
    const rec: SandboxRecord = { id: newId(), spec, createdAt: now(), bootId: this.bootId, mounts: [] }
    // Claimed before the first await, so a concurrent create for the same pod sees it.
    this.sandboxes.set(rec.id, rec)
    try {
      // A native holder makes its pod's cgroup itself, off this thread, as the native shim makes
      // its container's (see launch).
      let steps: ReadonlyArray<Cgroups.Step> = []
      if (this.cg.version !== "none") {
        if (this.isolated && this.tools.native !== undefined) steps = this.cg.steps(rec.id, spec.resources)
        else await this.cg.create(rec.id, spec.resources)
        this.podCgroups.add(rec.id)
      }
      if (this.allocatesUids) rec.uid = this.allocateUid()
      if (this.isolated) rec.holder = await this.startHolder(rec.id, (spec.hostname ?? spec.name).slice(0, 63), podNetwork, steps)
      if (podNetwork) await this.connect(rec, spec.podCidr!)
      // After connect: the pod's resolv.conf is bound from the box's data dir.
      if (rec.holder !== undefined) this.hideNode(rec)
      if (podNetwork) this.openLowPorts(rec)
      await this.saveSandbox(rec)
    } catch (e) {
      this.sandboxes.delete(rec.id)
      if (rec.holder) kill({ pid: rec.holder.pid, startTime: rec.holder.startTime }, "SIGKILL")
      this.cg.remove(rec.id)
      this.podCgroups.delete(rec.id)
      if (podNetwork) {
        this.ipam?.release(rec.id)
        void this.podNet?.detach(rec.id)
      }
      if (e instanceof Runtime.Invalid) throw e
      throw e instanceof Runtime.Unavailable ? e : new Runtime.Unavailable({ message: `sandbox: ${String(e)}` })
    }
    return this.sandboxOf(rec)
  }

  /**
   * Link a new sandbox's network namespace to the node: an address from the IPAM (recorded on
   * disk before it is used), the veth on the bridge, and the pod's resolv.conf bind-mounted in
   * its mount namespace.
   */
  private async connect(rec: SandboxRecord, cidr: string): Promise<void> {
    const holder = rec.holder!
    let ip: string
    try {
      ip = this.ipam!.allocate(cidr, rec.id)
    } catch (e) {
      throw invalid(`podCidr: ${e instanceof Error ? e.message : String(e)}`)
    }
    rec.network = { ip, cidr }
    await this.podNet!.attach(rec.id, holder.pid, ip, cidr)
    if (rec.spec.dns !== undefined) {
      const file = join(this.dataDir, "sandboxes", `${rec.id}.resolv.conf`)
      writeFileSync(file, PodNetworks.resolvConf(rec.spec.dns), { mode: 0o644 })
      await Nftables.run([this.tools.nsenter!, "-t", String(holder.pid), "-m", "--", "mount", "--bind", file, "/etc/resolv.conf"])
    }
  }

  /**
   * A uid for a new pod, from Confinement.uidRange: one no other pod of this box has (kept in the
   * sandbox's record, so a restarted box and its re-adopted pods agree on it).
   */
  private allocateUid(): number {
    const used = new Set<number>()
    for (const s of this.sandboxes.values()) if (s.uid !== undefined) used.add(s.uid)
    const uid = Confinement.allocateUid(used)
    if (uid === undefined) throw new Runtime.Unavailable({ message: `sandbox: every uid of ${Confinement.uidRange.first}-${Confinement.uidRange.last} is in use` })
    return uid
  }

  /**
   * Let any uid of a pod with its own network namespace listen on ports below 1024 there, as
   * containerd does (`net.ipv4.ip_unprivileged_port_start=0`): its processes are not root, and
   * the namespace's ports are its own. Host-network pods keep the host's rule.
   */
  private openLowPorts(rec: SandboxRecord): void {
    const r = spawnSync(this.tools.nsenter!, ["-t", String(rec.holder!.pid), "-n", "--", this.tools.sh, "-c", "echo 0 >/proc/sys/net/ipv4/ip_unprivileged_port_start"], {
      encoding: "utf8"
    })
    if (r.status !== 0) throw new Runtime.Unavailable({ message: `sandbox: cannot open low ports in the pod's network: ${(r.stderr || r.error?.message || "failed").trim()}` })
  }

  /** Cover the node's directories in a new pod's mount namespace (NodeHiding.ts); a pod that cannot be hidden from them does not start. */
  private hideNode(rec: SandboxRecord): void {
    // Only what exists now: a path of one made later is not translated for this pod's mounts.
    const hidden = NodeHiding.plan([this.dataDir, this.runDir, ...(this.options.hide ?? [])]).filter((d) => existsSync(d))
    const cover = NodeHiding.coverDirName(rec.id)
    const r = spawnSync(this.tools.nsenter!, ["-t", String(rec.holder!.pid), "-m", "--", this.tools.sh, "-c", NodeHiding.hideScript, "hide", cover, ...hidden], {
      encoding: "utf8"
    })
    // The covers were made there, on the host; the pod's namespace keeps them where they moved.
    for (const d of hidden)
      try {
        rmdirSync(join(d, cover))
      } catch {
        // not made (the script stopped before it), or gone
      }
    if (r.status !== 0) throw new Runtime.Unavailable({ message: `sandbox: cannot hide the node's directories: ${(r.stderr || r.error?.message || "failed").trim()}` })
    rec.hidden = hidden
  }

  /**
   * The launch file of every pod holder whose hostname can be passed as an argument (written once,
   * under a name that changes with its content: a running shell reads its file as it goes, so
   * a file in use is never rewritten).
   */
  private holderLaunchFile(net: boolean): string {
    let file = this.holderFiles.get(net)
    if (file === undefined) {
      const text = Shim.holderFile(this.tools, () => this.idleFifo(), net)
      file = join(this.dataDir, "sandboxes", `holder-${createHash("sha256").update(text).digest("hex").slice(0, 12)}.launch`)
      if (!existsSync(file)) writeTextSync(file, text)
      this.holderFiles.set(net, file)
    }
    return file
  }

  /**
   * The FIFO pod holders block on (see Shim.holderScript), made when missing: a holder whose
   * launch cannot open it does not start. Holders keep it open, so removing it stops none.
   */
  private idleFifo(): string {
    const file = join(this.runDir ?? join(this.dataDir, "sandboxes"), "idle.fifo")
    let fifo = false
    try {
      fifo = lstatSync(file).isFIFO()
    } catch {
      // not there yet
    }
    if (!fifo) {
      rmSync(file, { force: true })
      const r = spawnSync(this.tools.mkfifo, ["-m", "600", file], { encoding: "utf8" })
      if (r.status !== 0) throw new Runtime.Unavailable({ message: `sandbox: cannot make ${file}: ${(r.stderr || r.error?.message || "mkfifo failed").trim()}` })
    }
    return file
  }

  private async startHolder(id: string, hostname: string, net = false, steps: ReadonlyArray<Cgroups.Step> = []): Promise<NonNullable<SandboxRecord["holder"]>> {
    let answer: Array<string> | undefined
    // One launch file serves every pod, unless the pod's file must name its hostname or its cgroup.
    if (Shim.plainHostname(hostname) && steps.length === 0) answer = await this.launcher.run(this.holderLaunchFile(net), hostname)
    else {
      const file = join(this.launchDir ?? join(this.dataDir, "sandboxes"), `${id}.launch`)
      writeFileSync(file, Shim.holderFile(this.tools, () => this.idleFifo(), net, hostname, steps), { mode: 0o600 })
      answer = await this.launcher.run(file)
      rmSync(file, { force: true })
    }
    const unshare = processId(Number(answer?.[0]))
    // The native holder answers once it is ready, as both maker and holder ("-": it failed);
    // unshare does not answer for its child.
    if (answer?.[1] !== undefined) {
      const holder = processId(Number(answer[1]))
      if (unshare !== undefined && holder !== undefined) return { unshare, pid: holder.pid, startTime: holder.startTime }
      throw new Runtime.Unavailable({ message: "sandbox: the namespace holder did not start" })
    }
    for (let i = 0; i < 1000 && unshare !== undefined; i++) {
      const [pid] = Procfs.children(unshare.pid)
      const holder = processId(pid)
      if (holder !== undefined) return { unshare, pid: holder.pid, startTime: holder.startTime }
      await sleep(i < 20 ? 1 : 5)
    }
    throw new Runtime.Unavailable({ message: "sandbox: the namespace holder did not start" })
  }

  /**
   * The network namespace of a container's pod (`/proc/<holder>/ns/net`), when the pod has its
   * own (`network: pod`) and it is alive: where NetworkPolicy rules for the pod go.
   */
  podNetns(containerId: string): string | undefined {
    const sb = this.sandboxes.get(this.live(containerId).rec.spec.sandboxId)
    if (sb?.network === undefined || sb.holder === undefined || !Procfs.isAlive(sb.holder.pid, sb.holder.startTime)) return undefined
    return PodNetworks.netnsPath(sb.holder.pid)
  }

  getSandbox(id: string): Runtime.Sandbox {
    const rec = this.sandboxes.get(id)
    if (rec === undefined) throw notFound("sandbox", id)
    return this.sandboxOf(rec)
  }

  listSandboxes(filter?: Runtime.SandboxFilter): Array<Runtime.Sandbox> {
    // Matched on the records first: a view reads /proc (is the holder alive?), and the agent
    // lists one pod's sandbox per sync, so viewing them all made N pods cost O(N²) reads.
    const asked = [...this.sandboxes.values()].filter((s) => Runtime.matchesSandbox(s, filter))
    return asked.map((s) => this.sandboxOf(s))
  }

  async removeSandbox(id: string): Promise<void> {
    const rec = this.sandboxes.get(id)
    if (rec === undefined) return
    await Promise.all([...this.containers.values()].filter((c) => c.rec.spec.sandboxId === id).map((c) => this.removeContainer(c.rec.id)))
    if (rec.holder && rec.bootId === this.bootId) {
      // SIGKILL of a pid namespace's pid 1 kills everything in the namespace.
      kill({ pid: rec.holder.pid, startTime: rec.holder.startTime }, "SIGKILL")
      kill(rec.holder.unshare, "SIGKILL")
      for (let i = 0; i < 200 && Procfs.isAlive(rec.holder.pid, rec.holder.startTime); i++) await sleep(5)
    }
    if (this.cg.version !== "none") {
      await this.cg.killAll(id)
      this.cg.remove(id)
      this.podCgroups.delete(id)
    }
    if (rec.network !== undefined) {
      // The namespace ended with its holder, taking the veth along; the host end goes in any case.
      await this.podNet?.detach(id)
      this.ipam?.release(id)
      rmSync(join(this.dataDir, "sandboxes", `${id}.resolv.conf`), { force: true })
    }
    // A write still in flight would bring the record back after its removal.
    await this.writing.get(join(this.dataDir, "sandboxes", `${id}.json`))?.done
    rmSync(join(this.dataDir, "sandboxes", `${id}.json`), { force: true })
    this.recordSizes.delete(join(this.dataDir, "sandboxes", `${id}.json`))
    this.sandboxes.delete(id)
  }

  /**
   * Bind-mount a container's mounts into its pod's mount namespace (once per path); the sandbox's
   * record is written again only when a path was added.
   */
  private async bindMounts(sb: SandboxRecord, mounts: ReadonlyArray<Runtime.Mount>): Promise<void> {
    if (sb.holder === undefined || this.tools.nsenter === undefined) return
    const before = sb.mounts.length
    for (const m of mounts) {
      if (sb.mounts.includes(m.containerPath)) continue
      const r = spawnSync(
        this.tools.nsenter,
        // The source as the box reaches it in the pod's namespace, where the node's directories are covered.
        ["-t", String(sb.holder.pid), "-m", "--", this.tools.sh, "-c", Shim.mountScript, "mount", NodeHiding.sourceIn(sb.hidden ?? [], m.hostPath), m.containerPath, m.readOnly === true ? "ro" : "rw"],
        { encoding: "utf8" }
      )
      if (r.status !== 0)
        throw invalid(`mount ${m.hostPath} at ${m.containerPath}: ${(r.stderr || r.error?.message || "failed").trim()}`)
      sb.mounts.push(m.containerPath)
    }
    if (sb.mounts.length !== before) await this.saveSandbox(sb)
  }

  // ---------------------------------------------------------------------------------------------
  // Containers
  // ---------------------------------------------------------------------------------------------

  private live(id: string): Live {
    const c = this.containers.get(id)
    if (c === undefined) throw notFound("container", id)
    return c
  }

  async createContainer(spec: Runtime.ContainerSpec): Promise<Runtime.Container> {
    if (!this.sandboxes.has(spec.sandboxId)) throw notFound("sandbox", spec.sandboxId)
    if (spec.command.length === 0) throw invalid("command: required (the process driver runs host commands)")
    for (const [k, v] of Object.entries(spec.env ?? {}))
      if (k === "" || k.includes("=") || k.includes("\0") || v.includes("\0"))
        throw invalid(`env: invalid variable ${JSON.stringify(k)} (no "=" in names, no NUL anywhere)`)
    for (const a of [...spec.command, ...(spec.args ?? []), spec.workingDir ?? ""])
      if (a.includes("\0")) throw invalid("command, args, workingDir: no NUL characters")
    if (spec.user !== undefined && !this.info.capabilities.runAsUser)
      throw invalid("user: this box cannot switch users (capabilities.runAsUser is false)")
    if (spec.stopSignal !== undefined && signalOf(spec.stopSignal) === undefined)
      throw invalid(`stopSignal: unknown signal ${spec.stopSignal}`)
    for (const c of this.containers.values()) {
      const s = c.rec.spec
      if (s.sandboxId === spec.sandboxId && s.name === spec.name && s.attempt === spec.attempt)
        throw new Runtime.AlreadyExists({
          kind: "container",
          id: c.rec.id,
          message: `container ${spec.name} attempt ${spec.attempt} exists as ${c.rec.id}`
        })
    }
    // A pod a box from before confinement made (and this one adopted) gets its uid and covers now.
    // (Synchronous up to the claim below; the record is saved after it.)
    const sb = this.sandboxes.get(spec.sandboxId)!
    const upgraded = spec.security !== undefined && this.allocatesUids && (sb.uid === undefined || (sb.holder !== undefined && sb.hidden === undefined))
    if (upgraded) {
      sb.uid ??= this.allocateUid()
      if (sb.holder !== undefined && sb.hidden === undefined && Procfs.isAlive(sb.holder.pid, sb.holder.startTime)) this.hideNode(sb)
    }
    const confinement = this.confinementOf(spec)
    if (Either.isLeft(confinement)) {
      if (upgraded) await this.saveSandbox(sb)
      throw invalid(confinement.left)
    }
    const id = newId()
    const rec: ContainerRecord = {
      id,
      spec,
      createdAt: now(),
      bootId: this.bootId,
      status: { state: "created" },
      cgroup: false,
      ...(this.runDir === undefined ? {} : { runDir: join(this.runDir, id) })
    }
    // Claimed before the first await, so a concurrent create of the same attempt sees it.
    this.track(rec)
    if (upgraded) await this.saveSandbox(sb)
    mkdirSync(this.containerDir(rec.id), { recursive: true, mode: 0o700 })
    if (rec.runDir !== undefined) mkdirSync(rec.runDir, { recursive: true, mode: 0o700 })
    await this.save(rec)
    return this.view(rec)
  }

  /**
   * Whether pods get a uid of their own: only where they also get their own mount namespace. With
   * `--isolation none` a pod sees the host's files as they are, so an allocated uid could not reach
   * its volumes under the agent's private (0700) data dir; such a box runs trusted workloads only.
   */
  private get allocatesUids(): boolean {
    return this.info.capabilities.runAsUser && this.isolated
  }

  /** How a container of this box runs (Confinement.ts): its pod's uid when it names none. */
  private confinementOf(spec: Runtime.ContainerSpec): Either.Either<Confinement.Confinement, string> {
    const sb = this.sandboxes.get(spec.sandboxId)
    const decided = Confinement.decide(spec, this.info.capabilities.runAsUser ? sb?.uid : undefined)
    // A box that is not root cannot switch users or change capabilities (it has none to give or
    // take): its pods run as it does, refused only when they must not run as root (docs/box.md).
    return this.info.capabilities.runAsUser ? decided : Either.map(decided, () => Confinement.legacy(spec.user))
  }

  /** The chain's context of a container: its pod's namespaces and its confinement. */
  private contextOf(sb: SandboxRecord | undefined, spec: Runtime.ContainerSpec): Shim.Context {
    // Checked at create; a record from before a change of the rules runs as it was made then.
    const c = Either.getOrElse(this.confinementOf(spec), () => Confinement.legacy(spec.user))
    return {
      holderPid: sb?.holder?.pid,
      net: sb?.network !== undefined,
      user: c.user === undefined ? undefined : { uid: c.user.uid, gid: c.user.gid, supplementalGroups: c.user.groups },
      capabilities: c.capabilities,
      noNewPrivs: c.noNewPrivs,
      // Only where the container has a mount namespace to make read-only without touching the host's.
      readOnlyRoot: c.readOnlyRoot && sb?.holder !== undefined
    }
  }

  private view(rec: ContainerRecord): Runtime.Container {
    // The status's pid, for a view: isolated, the main process appears a moment after the start,
    // and a lookup reads /proc twice; every sync of a starting pod viewing its container made that
    // a cost per view, so views look at most every 100 ms (inspect and exec wait for it instead).
    const at = Date.now()
    if (rec.main === undefined && at - (this.mainLookedUp.get(rec.id) ?? 0) >= 100) {
      this.mainLookedUp.set(rec.id, at)
      if (this.findMain(rec) !== undefined) this.mainLookedUp.delete(rec.id)
    }
    return { id: rec.id, spec: rec.spec, status: rec.status, createdAt: rec.createdAt }
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
    if (sb.holder && !Procfs.isAlive(sb.holder.pid, sb.holder.startTime))
      throw invalid(`sandbox ${sb.id} is not ready: its namespaces are gone`)
    const dir = this.shimDir(rec)
    const path = `${sb.id}/${rec.id}`
    const ctx = this.contextOf(sb, spec)
    // The native shim makes the container's cgroup itself, off this thread: a cgroup's mkdir
    // waits on the kernel's cgroup lock, which every process joining a cgroup holds for an RCU
    // grace period, so in a burst of starts the box's thread would stand still in mkdir.
    const native = Shim.nativeFits(this.tools, { ctx })
    let cgroupSteps: ReadonlyArray<Cgroups.Step> = []
    if (this.cg.version !== "none") {
      // The pod's cgroup again too when this box adopted the pod: a closing box may have
      // released it while it was empty.
      if (!this.podCgroups.has(sb.id)) {
        await this.cg.create(sb.id, sb.spec.resources)
        this.podCgroups.add(sb.id)
      }
      if (native) cgroupSteps = this.cg.steps(path, spec.resources)
      else await this.cg.create(path, spec.resources)
      rec.cgroup = true
    }
    await this.bindMounts(sb, spec.mounts ?? [])
    const env: Record<string, string> = { PATH: defaultPath, ...spec.env }
    const file = this.launchDir === undefined ? join(dir, "launch") : join(this.launchDir, `${rec.id}.launch`)
    await this.fifos?.take(dir)
    // FIFOs from the pool are there before the shim: read them from now on, so the output of a
    // workload that ends at once is not lost with the pipe when its shim ends before the box attached.
    if (existsSync(join(dir, "stdout.fifo")) && existsSync(join(dir, "stderr.fifo"))) {
      const writer = new ContainerLogs.Writer(this.containerDir(rec.id), this.rotation, dir)
      c.writer = writer
      void writer.attach({ holdOpen: true })
    }
    const workload: Shim.Workload = {
      ctx,
      workingDir: spec.workingDir ?? "",
      argv: [...spec.command, ...(spec.args ?? [])],
      env,
      cgroupFiles: rec.cgroup ? this.cg.procsFiles(path) : [],
      cgroupSteps
    }
    // The native shim is the workload's parent even in a pod; nsenter is between them otherwise.
    const throughNsenter = sb.holder !== undefined && !native
    writeFileSync(file, Shim.launchFile(this.tools, dir, workload), { mode: 0o600 })
    // Recorded before the launch: a box that dies right here finds the shim through its pid file.
    rec.status = { state: "running", startedAt: now() }
    void this.save(rec)
    const answer = await this.launcher.run(file)
    // The launch file holds the environment (secrets): it is not kept.
    void unlink(file).catch(() => undefined)
    const shim = processId(Number(answer?.[0]))
    if (shim) rec.shim = shim
    const launched = Number(answer?.[1])
    if (Number.isInteger(launched) && launched > 0) {
      const launcher = processId(launched)
      if (launcher) rec.launcher = launcher
      rec.isolated = throughNsenter
      if (!rec.isolated && launcher) rec.main = launcher
      rec.status = { state: "running", ...(rec.main ? { pid: rec.main.pid } : {}), startedAt: rec.status.startedAt! }
    }
    void this.save(rec)
    this.attachLogs(c)
  }

  /**
   * The workload's main process. Isolated, it is nsenter's child, which appears a moment after
   * the launch: looked up when first needed (waiting up to `waitMs`), not on the start's path.
   */
  private async mainOf(rec: ContainerRecord, waitMs = 0): Promise<ProcessId | undefined> {
    const end = Date.now() + waitMs
    for (;;) {
      const main = this.findMain(rec)
      if (main !== undefined || Date.now() >= end) return main
      // Nothing will appear: the container is not running, or its launcher is gone.
      const launcher = rec.launcher
      if (rec.status.state !== "running" || launcher === undefined || !Procfs.isAlive(launcher.pid, launcher.startTime)) return undefined
      await sleep(2)
    }
  }

  private findMain(rec: ContainerRecord): ProcessId | undefined {
    if (rec.main !== undefined || rec.status.state !== "running") return rec.main
    const launcher = rec.launcher
    if (launcher === undefined || !Procfs.isAlive(launcher.pid, launcher.startTime)) return undefined
    const main = processId(Procfs.children(launcher.pid)[0])
    if (main !== undefined) {
      rec.main = main
      rec.status = { ...rec.status, pid: main.pid }
      void this.save(rec)
    }
    return main
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
      if (gracePeriodMs > 0) {
        const signal = (signalOf(c.rec.spec.stopSignal ?? "SIGTERM") ?? "SIGTERM") as NodeJS.Signals
        kill((await this.mainOf(c.rec, 1000)) ?? c.rec.launcher, signal)
      }
      if (!(await this.waitExit(c, Math.max(0, gracePeriodMs)))) {
        c.killedByBox = true
        await this.killTree(c.rec)
        if (!(await this.waitExit(c, 10_000))) throw new Runtime.Unavailable({ message: `container ${id} did not die` })
      }
    }
    return this.view(c.rec)
  }

  async signalContainer(id: string, signal: string): Promise<void> {
    const c = this.live(id)
    const name = signalOf(signal)
    if (name === undefined) throw invalid(`unknown signal ${signal}`)
    const main = c.rec.status.state === "running" ? await this.mainOf(c.rec, 1000) : undefined
    if (name === "SIGKILL") c.killedByBox = true
    if (main === undefined || !kill(main, name as NodeJS.Signals)) throw invalid(`container ${id} is not running`)
  }

  async execContainer(id: string, request: Runtime.ExecRequest): Promise<Runtime.ExecResult> {
    const c = this.live(id)
    const rec = c.rec
    if (rec.status.state !== "running" || c.starting) throw invalid(`container ${id} is not running`)
    if (request.command.length === 0) throw invalid("command: required")
    const sb = this.sandboxes.get(rec.spec.sandboxId)
    const env: Record<string, string> = { PATH: defaultPath, ...rec.spec.env, ...request.env }
    if (rec.cgroup) env.FLEET_SHIM_CGROUPS = this.cg.procsFiles(`${rec.spec.sandboxId}/${rec.id}`).join(" ")
    const ctx = this.contextOf(sb, rec.spec)
    const child = spawn(this.tools.sh, Shim.execArgv(this.tools, ctx, request.workingDir ?? rec.spec.workingDir ?? "", request.command), {
      detached: true,
      env,
      cwd: "/",
      stdio: ["pipe", "pipe", "pipe"]
    })
    await spawned(child).catch((e) => {
      throw new Runtime.Unavailable({ message: `exec: ${String(e)}` })
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
    const root = processId(child.pid)
    const timer =
      request.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true
            // The command's tree, then the command itself (nsenter when isolated; see killTree).
            if (root && ctx.holderPid !== undefined)
              void killProcesses(() => Procfs.tree(root.pid).filter((s) => s.pid !== root.pid)).then(async () => {
                for (let i = 0; i < 100 && Procfs.isAlive(root.pid, root.startTime); i++) await sleep(5)
                kill(root, "SIGKILL")
              })
            else if (root) void killProcesses(() => Procfs.tree(root.pid))
          }, request.timeoutMs)
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.once("close", (code, signal) => resolve([code, signal]))
    )
    if (timer) clearTimeout(timer)
    return {
      exitCode: code ?? 128 + (signal === null ? 9 : (signalNumber(signal) ?? 9)),
      stdout: Buffer.concat(out.stdout).toString("utf8"),
      stderr: Buffer.concat(out.stderr).toString("utf8"),
      timedOut
    }
  }

  async removeContainer(id: string): Promise<void> {
    const c = this.containers.get(id)
    if (c === undefined) return
    if (c.starting) await c.starting.catch(() => undefined)
    if (c.rec.status.state === "running") {
      c.killedByBox = true
      await this.killTree(c.rec)
      await this.waitExit(c, 10_000)
    }
    c.writer?.close()
    c.watcher?.close()
    this.containers.delete(id)
    if (c.rec.cgroup) this.cg.remove(`${c.rec.spec.sandboxId}/${id}`)
    // A record write in flight would put a file back into the directory while it is removed.
    await this.writing.get(join(this.containerDir(id), "state.json"))?.done
    rmSync(this.containerDir(id), { recursive: true, force: true })
    if (c.rec.runDir !== undefined) rmSync(c.rec.runDir, { recursive: true, force: true })
    this.recordSizes.delete(join(this.containerDir(id), "state.json"))
    this.mainLookedUp.delete(id)
    this.sealedEnvs.delete(id)
  }

  async listContainers(filter?: Runtime.ContainerFilter): Promise<Array<Runtime.Container>> {
    // Only the containers asked about are brought up to date: the agent lists one pod's
    // containers per sync, and refreshing all of them each time (an exit file and /proc reads per
    // container) made a node of N pods do O(N²) file reads while they started.
    // (The state is matched after the refresh: a container may have just exited.)
    const { state: _state, ...identity } = filter ?? {}
    // Matched on the records (a view may read /proc for the main process), viewed once matched.
    const asked = [...this.containers.values()].filter((c) => Runtime.matchesContainer(c.rec, identity))
    await Promise.all(asked.map((c) => this.refresh(c)))
    return asked.map((c) => this.view(c.rec)).filter((c) => Runtime.matchesContainer(c, filter))
  }

  async inspectContainer(id: string): Promise<Runtime.Container> {
    const c = this.live(id)
    await this.refresh(c)
    // Isolated, the main process is nsenter's child, a moment behind a start: an inspection
    // (the kbox API answers a start with one) waits for it. A start itself does not: polling
    // /proc for it made every start of a burst slower, and the agent never asks for the pid.
    if (c.rec.isolated === true && c.starting === undefined) await this.mainOf(c.rec, 500)
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
    const sample = rec.cgroup ? this.cg.sample(`${rec.spec.sandboxId}/${rec.id}`) : undefined
    if (sample) {
      cpuNanos = sample.cpuNanos
      workingSet = sample.workingSetBytes
      rss = sample.rssBytes
      limit = sample.memoryLimitBytes
      pids = sample.pids
    } else {
      const procs = rec.launcher ? Procfs.tree(rec.launcher.pid) : []
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

  processesOf(id: string): Array<Runtime.Process> {
    const rec = this.live(id).rec
    if (rec.status.state !== "running") return []
    const pids = rec.cgroup
      ? this.cg.pids(`${rec.spec.sandboxId}/${rec.id}`)
      : rec.launcher
        ? Procfs.tree(rec.launcher.pid).map((s) => s.pid)
        : []
    const out: Array<Runtime.Process> = []
    for (const pid of pids) {
      const s = Procfs.stat(pid)
      if (s === undefined || s.state === "Z") continue
      out.push({ pid, ppid: s.ppid, command: s.comm, args: Procfs.cmdline(pid), rssBytes: s.rssPages * Procfs.pageSize, state: s.state })
    }
    return out
  }

  // ---------------------------------------------------------------------------------------------
  // Images: rootfs tarballs stored by digest (the runc driver runs them; this one keeps them).
  // ---------------------------------------------------------------------------------------------

  private imagesIndex(): Array<Runtime.Image> {
    try {
      return JSON.parse(readFileSync(join(this.dataDir, "images", "index.json"), "utf8")) as Array<Runtime.Image>
    } catch {
      return []
    }
  }

  async importImage(request: Runtime.ImportRequest): Promise<Runtime.Image> {
    const name = /:[^/]+$/.test(request.name) ? request.name : `${request.name}:latest`
    if (!/^[a-z0-9][a-z0-9._\-/]*:[\w][\w.-]*$/.test(name)) throw invalid(`name: ${JSON.stringify(request.name)} is not NAME:TAG`)
    let size: number
    try {
      size = statSync(request.path).size
    } catch {
      throw invalid(`path: ${request.path} cannot be read`)
    }
    const hash = createHash("sha256")
    await new Promise<void>((resolve, reject) =>
      createReadStream(request.path).on("data", (b) => hash.update(b)).on("end", resolve).on("error", reject)
    )
    const hex = hash.digest("hex")
    const blobs = join(this.dataDir, "images", "blobs")
    mkdirSync(blobs, { recursive: true, mode: 0o700 })
    const blob = join(blobs, `sha256-${hex}.tar`)
    if (!existsSync(blob)) {
      copyFileSync(request.path, `${blob}.tmp`)
      renameSync(`${blob}.tmp`, blob)
    }
    const digest = `sha256:${hex}`
    const index = this.imagesIndex().map((i) => ({ ...i, names: i.names.filter((n) => n !== name) }))
    const existing = index.find((i) => i.digest === digest)
    const image: Runtime.Image = existing
      ? { ...existing, names: [...existing.names, name] }
      : { names: [name], digest, sizeBytes: size, importedAt: now() }
    const next = [...index.filter((i) => i.digest !== digest), image]
    writeJson(join(this.dataDir, "images", "index.json"), next)
    return image
  }

  listImages(): Array<Runtime.Image> {
    return this.imagesIndex()
  }
}

/** SIGKILL what `list` returns until it returns nothing (bounded: a fork bomb hits its pids limit). */
const killProcesses = async (list: () => ReadonlyArray<Procfs.Stat>): Promise<void> => {
  for (let i = 0; i < 100; i++) {
    const procs = list()
    if (procs.length === 0) return
    for (const p of procs) {
      try {
        process.kill(p.pid, "SIGKILL")
      } catch {
        // gone
      }
    }
    await sleep(10)
  }
}

/** Resolve when a child process has been spawned, reject when it could not be. */
const spawned = (child: ChildProcess) =>
  new Promise<void>((resolve, reject) => {
    child.once("spawn", resolve)
    child.once("error", reject)
  })

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
    catch: (e) =>
      (isRuntimeError(e) ? e : new Runtime.Unavailable({ message: e instanceof Error ? e.message : String(e) })) as E
  })

/** The driver as core's Runtime service. */
export const toRuntime = (d: ProcessDriver): Runtime.RuntimeService => ({
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
    applyNetworkPolicy: (id, rules) => call(() => NetworkPolicyEnforcer.applyToPod(d.podNetns(id), rules))
  },
  images: {
    import: (request) => call(() => d.importImage(request)),
    list: call(() => d.listImages())
  }
})
