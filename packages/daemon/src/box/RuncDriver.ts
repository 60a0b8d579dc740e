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
import { Runtime, type StreamSession } from "@koder/fleet-core"
import { Either } from "effect"
import { spawn, spawnSync } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import { existsSync, mkdirSync, readFileSync, rmdirSync, rmSync } from "node:fs"
import { mkdir, rm, writeFile } from "node:fs/promises"
import { basename, dirname, join } from "node:path"
import * as Cgroups from "./Cgroups.js"
import * as Confinement from "./Confinement.js"
import type * as ContainerLogs from "./ContainerLogs.js"
import * as ContainerStats from "./ContainerStats.js"
import { checkArgv, checkStopSignal, newId, now, readySandbox, sleep, type ContainerRecord as BaseRecord, ContainerTable, type Ending, exitCodeIn, type Live as LiveOf } from "./ContainerTable.js"
import { type Driver, type SandboxRecord as BaseSandbox, invalid, notFound, toRuntime as driverRuntime, unavailable } from "./Driver.js"
import * as EnvSeal from "./EnvSeal.js"
import * as ExecOutput from "./ExecOutput.js"
import * as ExecSession from "./ExecSession.js"
import { ImagePuller } from "./ImagePuller.js"
import { ImageStore, toImages } from "./Images.js"
import * as RegistryConfig from "./RegistryConfig.js"
import * as Oci from "./Oci.js"
import * as Procfs from "./Procfs.js"
import { loadRecords, lockDataDir, readText, RecordWriter, unlockDataDir, writeAtomic, writeJson } from "./RecordFiles.js"
import { lastRuncError, run, shimScript } from "./RuncCommand.js"
import { RuncHolders } from "./RuncHolder.js"
import * as RuncRootfs from "./RuncRootfs.js"
import { exitCodeOf, signalNumber, signalOf } from "./Signals.js"
import { which } from "./Tools.js"
import * as UserNamespace from "./UserNamespace.js"

export { lastRuncError } from "./RuncCommand.js"
export { hierarchyDirs } from "./RuncRootfs.js"

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
  /** Image garbage collection: above `highPercent` disk use, unused images go until below `lowPercent` (default 85/80, the kubelet's). */
  readonly imageGc?: { readonly highPercent: number; readonly lowPercent: number; readonly intervalMs?: number }
  /** k3s-style `registries.yaml` for pulls (mirrors, plain-HTTP endpoints, CAs, credentials), read at each pull. */
  readonly registries?: string
}

/** What `open` returns: the Runtime service, the driver's identity, and how to let go of it. */
export interface Handle {
  readonly runtime: Runtime.RuntimeService
  readonly info: Runtime.Info
  /** Whether pods get user namespaces, and why not. */
  readonly userns: UserNamespace.Probe
  /** Run the image garbage collector now (it also runs on its own). */
  readonly collectImages: () => { readonly images: ReadonlyArray<string>; readonly blobs: number }
  /** Stop watching; containers keep running for the next box to adopt. */
  readonly close: () => void
}

/** What the driver reports as its version. */
export const version = "0.1.0"

/** How long a container may take to be running after its shim started. */
const startTimeoutMs = 30_000

type ProcessId = Procfs.ProcessId

interface SandboxRecord extends BaseSandbox {
  /** The process owning the pod's UTS and IPC namespaces (`sleep`, after setting the hostname). */
  holder?: ProcessId
  /** The uid its containers run as when they name none (Confinement.uidRange). */
  uid?: number
  /** The first host id of its user namespace's range (UserNamespace); absent: no user namespace. */
  ids?: number
}

interface ContainerRecord extends BaseRecord {
  /** The image, pinned at create: a tag moved later does not change what this container runs. */
  readonly image: { readonly digest: string; readonly rootfs: string }
  /** How its root filesystem was made (at start): an overlay mount to undo, or a plain copy. */
  rootfs?: "overlay" | "copy"
  /**
   * In a user namespace: where the rootfs copy is bind-mounted for runc (under /run, which the
   * pod's root may traverse: the data dir need not be), to unmount and remove when it ends.
   */
  root?: string
  /** The container's init process (host pid). */
  init?: ProcessId
}

type Live = LiveOf<ContainerRecord>

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

const processId = Procfs.processId
const alive = Procfs.alive
const killPid = Procfs.signal

/** The repository digest of `image` that `ref`'s repository has (what `kubectl get pod` shows as imageID). */
const repoDigestOf = (image: Runtime.Image, ref: string): string | undefined => {
  const repo = ref.split("@")[0]!.replace(/:[^/:]*$/, "")
  return (image.repoDigests ?? []).find((d) => d.startsWith(`${repo}@`))
}

/** The runc driver. Open it with `RuncDriver.open`; it adopts what a previous box left running. */
export class RuncDriver implements Driver {
  readonly info: Runtime.Info
  readonly images: ImageStore
  readonly puller: ImagePuller
  private gcTimer: NodeJS.Timeout | undefined
  private readonly runcPath: string
  private readonly tools: { readonly sh: string; readonly unshare: string; readonly sleep: string; readonly mkfifo: string }
  private readonly cg: Cgroups.Cgroups
  /** The box's cgroup level (`kbox-<hash of the data dir>`), shared with Cgroups. */
  private readonly cgroupBase: string
  private readonly swapLimit: boolean
  private readonly rootfs: RuncRootfs.Rootfs
  private readonly holders: RuncHolders
  /** Whether pods get user namespaces (probed once at open). */
  readonly userns: UserNamespace.Probe
  /** Where user-namespaced containers' rootfs are bind-mounted (`/run/kbox-<hash of the data dir>`, 0711). */
  private readonly rootsDir: string
  /** Its containers. */
  readonly table: ContainerTable<ContainerRecord>
  private readonly records = new RecordWriter()
  private readonly rotation: ContainerLogs.Rotation
  private readonly sandboxes = new Map<string, SandboxRecord>()
  private readonly bootId = Procfs.bootId()
  private readonly hostFiles: ReadonlyArray<string>

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
    this.swapLimit = this.cg.version === "v2" || (this.cg.version === "v1" && RuncRootfs.memswAccounting())
    this.rotation = options.logRotation ?? { maxBytes: 10 * 1024 * 1024, maxFiles: 2 }
    this.rootsDir = join("/run", `kbox-${createHash("sha256").update(options.dataDir).digest("hex").slice(0, 12)}`)
    this.rootfs = new RuncRootfs.Rootfs(options.rootfs !== "copy" && /\toverlay\n/.test(readText("/proc/filesystems") ?? ""), this.rootsDir)
    this.holders = new RuncHolders(this.tools)
    this.table = new ContainerTable<ContainerRecord>(
      { dir: join(options.dataDir, "runc", "containers"), rotation: this.rotation, bootId: this.bootId, records: this.records },
      {
        shimDir: (rec) => this.containerDir(rec.id),
        adopt: (rec) => {
          // The box stopped between starting the shim and recording it: the shim wrote its pid.
          if (rec.shim === undefined) {
            const shim = processId(Number((readText(join(this.containerDir(rec.id), "shim")) ?? "").trim()))
            if (shim) rec.shim = shim
          }
        },
        reap: (c, code) => this.reap(c, code),
        observe: (rec) => void this.findInit(rec),
        usage: (rec) => {
          const sample = this.cg.sample(`${rec.spec.sandboxId}/${rec.id}`)
          return ContainerStats.usageOf(sample, sample === undefined ? this.findInit(rec)?.pid : undefined)
        },
        pids: (rec) => this.pidsOf(rec)
      },
      EnvSeal.make(randomBytes(32))
    )
    this.userns =
      options.userns === "off"
        ? { enabled: false, reason: "turned off (userns: off)" }
        : !existsSync("/run")
          ? { enabled: false, reason: "there is no /run to mount the pods' root filesystems under" }
          : UserNamespace.probe(this.tools.unshare)
    this.hostFiles = ["/etc/resolv.conf", "/etc/hosts"].filter((f) => existsSync(f))
    this.images = ImageStore.open(options.dataDir)
    this.puller = new ImagePuller(this.images, () => RegistryConfig.load(options.registries))
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
        drivers: ["process", "runc"],
        imagePull: true
      }
    }
  }

  /** Open the data dir: take its lock, load and re-adopt its sandboxes and containers. */
  static open(options: Options): RuncDriver {
    const d = new RuncDriver(options)
    for (const dir of ["containers", "sandboxes", "state"]) mkdirSync(join(options.dataDir, "runc", dir), { recursive: true, mode: 0o700 })
    // One box per data dir, whatever its driver (the process driver takes the same lock file).
    lockDataDir(options.dataDir)
    d.load()
    d.table.startPolling(options.pollIntervalMs ?? 1000)
    d.gcTimer = setInterval(() => {
      try {
        d.collectImages()
      } catch {
        // A disk that cannot be read now is read again at the next round.
      }
    }, options.imageGc?.intervalMs ?? 5 * 60_000)
    d.gcTimer.unref()
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
    return this.table.dirOf(id)
  }

  private sandboxFile(id: string) {
    return join(this.dataDir, "runc", "sandboxes", `${id}.json`)
  }

  private runc(args: ReadonlyArray<string>) {
    return run(this.runcPath, ["--root", this.runcRoot, ...args])
  }

  /** Stop watching (containers keep running: the next box adopts them). */
  /** Run the image garbage collector once (also every `imageGc.intervalMs`, default 5 minutes). */
  collectImages(): { readonly images: ReadonlyArray<string>; readonly blobs: number } {
    const inUse = new Set<string>()
    // Every container the box holds, exited ones too: its rootfs and `previous` logs need the image.
    for (const c of this.table.values()) inUse.add(c.rec.image.digest)
    const gc = this.options.imageGc ?? { highPercent: 85, lowPercent: 80 }
    return this.images.gc({ inUse, highPercent: gc.highPercent, lowPercent: gc.lowPercent })
  }

  close(): void {
    if (this.gcTimer !== undefined) clearInterval(this.gcTimer)
    this.table.close()
    // A container that ended while this box closed keeps its cgroup (runc --keep) until the next
    // box has read its OOM counter: the box's level goes only when no container is left to finalize.
    if (![...this.table.values()].some((c) => c.rec.status.state === "running")) {
      this.cg.release()
      RuncRootfs.rmdirQuiet(this.rootsDir)
      for (const d of RuncRootfs.hierarchyDirs(this.cgroupBase, readText("/proc/self/mountinfo") ?? "", readText("/proc/self/cgroup") ?? ""))
        try {
          rmdirSync(d)
        } catch {
          // pods' levels are still there, or it is gone
        }
    }
    unlockDataDir(this.dataDir)
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
    for (const rec of loadRecords<SandboxRecord>(join(this.dataDir, "runc", "sandboxes"))) this.sandboxes.set(rec.id, rec)
    const known = this.runcList()
    const owned = new Set(this.table.load(EnvSeal.load(join(this.dataDir, "runc"))))
    // runc containers no record runs (the box died while removing or finalizing one): not ours to keep.
    for (const id of known.keys()) if (!owned.has(id)) void this.runc(["delete", "--force", id])
  }

  // ---------------------------------------------------------------------------------------------
  // Exit
  // ---------------------------------------------------------------------------------------------

  /** A container's process ended: delete it with whatever is left of it, its cgroups and its rootfs mounts. */
  private async reap(c: Live, code: number | undefined): Promise<Ending> {
    const rec = c.rec
    const dir = this.containerDir(rec.id)
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
    await this.rootfs.unmount(dir, rec)
    delete rec.init
    // runc never got the process running: the image has no such command, working dir, user...
    if (code !== undefined && !started && code !== 0)
      return { oom, startError: { exitCode: 128, message: runcError ?? `runc exited ${code} before the container ran` } }
    return { oom }
  }

  // ---------------------------------------------------------------------------------------------
  // Cgroups and root filesystems
  // ---------------------------------------------------------------------------------------------

  /** Remove `relative` (`<sandbox>[/<container>]` under the box's level) in every hierarchy, where empty. */
  private removeCgroups(relative: string) {
    this.cg.remove(relative)
    const dirs = RuncRootfs.hierarchyDirs(join(this.cgroupBase, relative), readText("/proc/self/mountinfo") ?? "", readText("/proc/self/cgroup") ?? "")
    for (const d of dirs) RuncRootfs.removeCgroupTree(d)
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
      rec.holder = await this.holders.start(
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
    await Promise.all(this.table.ofSandbox(id).map((c) => this.removeContainer(c)))
    if (rec.bootId === this.bootId) killPid(rec.holder, "SIGKILL")
    if (this.cg.version !== "none") await this.cg.killAll(id)
    this.removeCgroups(id)
    rmSync(this.sandboxFile(id), { force: true })
    this.sandboxes.delete(id)
  }

  // ---------------------------------------------------------------------------------------------
  // Containers
  // ---------------------------------------------------------------------------------------------

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
    if (spec.command.length === 0) throw invalid("command: required (the image has no entrypoint or cmd, and the container names no command)")
    checkArgv(spec)
    if (spec.workingDir !== undefined && spec.workingDir !== "" && !spec.workingDir.startsWith("/"))
      throw invalid(`workingDir: ${JSON.stringify(spec.workingDir)} must be absolute`)
    const confinement = Confinement.decide(spec, this.sandboxes.get(spec.sandboxId)?.uid)
    if (Either.isLeft(confinement)) throw invalid(confinement.left)
    for (const m of spec.mounts ?? [])
      if (!m.containerPath.startsWith("/") || !m.hostPath.startsWith("/"))
        throw invalid(`mounts: ${m.hostPath} at ${m.containerPath}: both paths must be absolute`)
    checkStopSignal(spec)
    this.table.assertNew(spec)
    const image = await this.images.resolve(spec.image)
    // Checked again after the await: a concurrent create of the same attempt may have won.
    this.table.assertNew(spec)
    const rec: ContainerRecord = {
      id: newId(),
      spec,
      createdAt: now(),
      bootId: this.bootId,
      image: { digest: image.digest, rootfs: image.rootfs },
      imageRef: repoDigestOf(image.image, spec.image) ?? image.digest,
      status: { state: "created" }
    }
    this.table.track(rec)
    await mkdir(this.containerDir(rec.id), { recursive: true, mode: 0o700 })
    await this.table.save(rec)
    return this.table.view(rec)
  }

  /** The container's init, from runc's pid file (written once the process runs). */
  private findInit(rec: ContainerRecord): ProcessId | undefined {
    if (rec.init !== undefined || rec.status.state !== "running") return rec.init
    const init = processId(Number((readText(join(this.containerDir(rec.id), "init.pid")) ?? "").trim()))
    if (init !== undefined) {
      rec.init = init
      rec.status = { ...rec.status, pid: init.pid }
      void this.table.save(rec)
    }
    return init
  }

  startContainer(id: string): Promise<Runtime.Container> {
    return this.table.start(id, async (c) => this.launch(c, readySandbox(this.sandboxes, c.rec.spec, (sb) => this.ready(sb))))
  }

  /** Make the bundle and start the shim around `runc run`; running once runc wrote the init's pid. */
  private async launch(c: Live, sb: SandboxRecord): Promise<void> {
    const rec = c.rec
    const dir = this.containerDir(rec.id)
    const spec = rec.spec
    try {
      rec.rootfs = await this.rootfs.prepare(dir, rec.image.rootfs, rec.image.digest, sb.ids)
      if (sb.ids !== undefined) {
        rec.root = this.rootfs.target(rec.id)
        await this.rootfs.mountRoot(rec.id, dir, sb.ids)
      }
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
      await this.rootfs.unmount(dir, rec)
      throw e instanceof Runtime.Invalid || e instanceof Runtime.Unavailable ? e : unavailable(`start: ${String(e)}`)
    }
    // Recorded before the launch: a box that dies right here finds the shim through its `shim` file.
    rec.status = { state: "running", startedAt: now() }
    await this.table.save(rec)
    this.table.attach(c)
    const child = spawn(this.tools.sh, ["-c", shimScript, "kbox-runc-shim", dir, this.runcPath, this.runcRoot, rec.id], {
      detached: true,
      stdio: "ignore",
      cwd: "/",
      env: { PATH: Oci.defaultPath }
    })
    try {
      await ExecOutput.spawned(child)
    } catch (e) {
      rec.status = { state: "exited", exitCode: 128, reason: "StartError", message: `shim: ${String(e)}`, startedAt: rec.status.startedAt!, finishedAt: now() }
      c.writer?.close()
      c.writer = undefined
      await this.rootfs.unmount(dir, rec)
      await this.table.save(rec)
      c.markExited()
      return
    }
    child.unref()
    const shim = processId(child.pid)
    if (shim) rec.shim = shim
    child.once("exit", () => void this.table.refresh(c))
    void this.table.save(rec)
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
    const c = await this.table.settle(id)
    if (c.rec.status.state === "running") {
      if (gracePeriodMs > 0) await this.runc(["kill", id, String(signalNumber(signalOf(c.rec.spec.stopSignal ?? "SIGTERM") ?? "SIGTERM"))])
      if (!(await this.table.waitExit(c, Math.max(0, gracePeriodMs)))) await this.kill(c)
    }
    return this.table.view(c.rec)
  }

  /** SIGKILL the container's init (its pid namespace goes with it), then whatever is left in its cgroup. */
  private async kill(c: Live): Promise<void> {
    await this.runc(["kill", c.rec.id, "KILL"])
    if (await this.table.waitExit(c, 5_000)) return
    if (this.cg.version !== "none") await this.cg.killAll(`${c.rec.spec.sandboxId}/${c.rec.id}`)
    // runc itself (the shim's child) may be what is stuck: its end ends the shim, and finalizing
    // deletes the container with whatever is left of it.
    if (c.rec.shim !== undefined && alive(c.rec.shim))
      for (const pid of Procfs.children(c.rec.shim.pid)) killPid(processId(pid), "SIGKILL")
    if (!(await this.table.waitExit(c, 5_000))) throw unavailable(`container ${c.rec.id} did not die`)
  }

  async signalContainer(id: string, signal: string): Promise<void> {
    const c = this.table.live(id)
    const name = signalOf(signal)
    if (name === undefined) throw invalid(`unknown signal ${signal}`)
    await this.table.refresh(c)
    if (c.rec.status.state !== "running" || c.starting) throw invalid(`container ${id} is not running`)
    const r = await this.runc(["kill", id, String(signalNumber(name))])
    if (r.code !== 0) throw invalid(`container ${id} is not running (${r.stderr.trim()})`)
  }

  /** The files of one `runc exec`: its process spec (holds the environment: private), log and pid. */
  private async execFiles(id: string, command: ReadonlyArray<string>, env: Readonly<Record<string, string>> | undefined, workingDir: string | undefined, terminal = false) {
    const c = this.table.live(id)
    const rec = c.rec
    if (rec.status.state !== "running" || c.starting) throw invalid(`container ${id} is not running`)
    if (command.length === 0) throw invalid("command: required")
    const dir = this.containerDir(id)
    const tag = randomBytes(4).toString("hex")
    const files = { process: join(dir, `exec-${tag}.json`), log: join(dir, `exec-${tag}.log`), pid: join(dir, `exec-${tag}.pid`) }
    // With a terminal (`script` outside gives runc one as stdio), TERM says what it is, as containerd does.
    const fullEnv = { ...(terminal ? { TERM: "xterm" } : {}), ...rec.spec.env, ...env }
    const spec = Oci.processSpec(command, fullEnv, workingDir ?? rec.spec.workingDir, rec.spec.user, this.confinementOf(rec.spec))
    await writeFile(files.process, JSON.stringify(spec), { mode: 0o600 })
    const argv = ["--root", this.runcRoot, "--log", files.log, "--log-format", "json", "exec", "--process", files.process, "--pid-file", files.pid, id]
    return {
      files,
      argv,
      /** The command and what it started (runc exec then ends with its status); runc too if it hangs. */
      kill: (child: { kill: (s: NodeJS.Signals) => boolean }) => {
        const pid = Number((readText(files.pid) ?? "").trim())
        if (pid > 0) for (const p of Procfs.tree(pid)) killPid(p, "SIGKILL")
        setTimeout(() => child.kill("SIGKILL"), 2_000).unref()
      },
      /** The command could not be run (no such file, bad working dir): the contract's 126. */
      runcError: () => (existsSync(files.pid) ? undefined : lastRuncError(readText(files.log))),
      cleanup: () => {
        for (const f of Object.values(files)) void rm(f, { force: true }).catch(() => undefined)
      }
    }
  }

  async execContainer(id: string, request: Runtime.ExecRequest): Promise<Runtime.ExecResult> {
    const exec = await this.execFiles(id, request.command, request.env, request.workingDir)
    try {
      const child = spawn(this.runcPath, exec.argv, { stdio: ["pipe", "pipe", "pipe"], env: { PATH: Oci.defaultPath }, cwd: "/" })
      await ExecOutput.spawned(child).catch((e) => {
        throw unavailable(`exec: ${String(e)}`)
      })
      const out = await ExecOutput.collect(child, request, () => exec.kill(child))
      const runcError = exec.runcError()
      if (runcError !== undefined && !out.timedOut) return { exitCode: 126, stdout: "", stderr: `${runcError}\n`, timedOut: false }
      return { exitCode: out.timedOut ? 137 : exitCodeOf(out.code, out.signal), stdout: out.stdout, stderr: out.stderr, timedOut: out.timedOut }
    } finally {
      exec.cleanup()
    }
  }

  async execSession(id: string, request: StreamSession.ExecStreamRequest): Promise<StreamSession.StreamSession> {
    const exec = await this.execFiles(id, request.command, request.env, request.workingDir, request.tty)
    // runc gives a user-namespaced container pipes, not the caller's terminal (its stdio must be
    // chowned into the namespace); a terminal would need runc's console socket, which passes the
    // pty by SCM_RIGHTS, something Node cannot receive. A TTY exec is then one output stream.
    try {
      return await ExecSession.open({ file: this.runcPath, args: exec.argv, env: { PATH: Oci.defaultPath }, cwd: "/" }, request, {
        kill: exec.kill,
        failure: () => {
          const e = exec.runcError()
          return e === undefined ? undefined : { exitCode: 126, stderr: `${e}\n` }
        },
        cleanup: exec.cleanup
      }, true)
    } catch (e) {
      exec.cleanup()
      throw e
    }
  }

  attachSession(id: string, request: StreamSession.AttachRequest): Promise<StreamSession.StreamSession> {
    return Promise.resolve().then(() => this.table.attachStream(id, request))
  }

  async removeContainer(id: string): Promise<void> {
    const c = await this.table.remove(id, async (c) => {
      await this.table.refresh(c)
      if (c.rec.status.state === "running") await this.kill(c)
      if (c.finalizing) await c.finalizing
    })
    if (c === undefined) return
    await this.runc(["delete", "--force", id])
    const dir = this.containerDir(id)
    await this.rootfs.unmount(dir, c.rec)
    this.removeCgroups(`${c.rec.spec.sandboxId}/${id}`)
    // Never delete through a mount (an overlay that would not unmount): keep the directory instead.
    if (RuncRootfs.mountPoints().has(join(dir, "bundle", "rootfs"))) throw unavailable(`container ${id}: its rootfs is still mounted`)
    rmSync(dir, { recursive: true, force: true })
  }

  inspectContainer(id: string): Promise<Runtime.Container> {
    return this.table.inspect(id)
  }

  // runc containers share the host's network here: there is no pod namespace to enforce a policy in.
  async applyNetworkPolicy(id: string): Promise<Runtime.NetworkPolicyApplied> {
    await this.inspectContainer(id)
    throw new Runtime.Unsupported({ message: "network-policy: the runc driver has no pod network namespaces" })
  }

  /** The pids of a running container: its cgroup's, or runc's answer without cgroups. */
  private async pidsOf(rec: ContainerRecord): Promise<ReadonlyArray<number>> {
    if (this.cg.version !== "none") return this.cg.pids(`${rec.spec.sandboxId}/${rec.id}`)
    const r = await this.runc(["ps", "--format", "json", rec.id])
    return r.code === 0 ? ((JSON.parse(r.stdout.trim() || "[]") ?? []) as Array<number>) : []
  }
}

/** The driver as core's Runtime service. */
export const toRuntime = (d: RuncDriver): Runtime.RuntimeService => driverRuntime(d, toImages(d.images, d.puller))

/** Open the runc driver on a data dir (lock, load, re-adopt) as a Runtime service. */
export const open = (options: Options): Handle => {
  const driver = RuncDriver.open(options)
  if (!driver.userns.enabled) console.warn(`koder-fleet box: runc pods get no user namespace: ${driver.userns.reason}`)
  return { runtime: toRuntime(driver), info: driver.info, userns: driver.userns, collectImages: () => driver.collectImages(), close: () => driver.close() }
}
