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
import { Runtime, type StreamSession } from "@koder/fleet-core"
import { Either } from "effect"
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { unlink } from "node:fs/promises"
import { join } from "node:path"
import * as Cgroups from "./Cgroups.js"
import * as Confinement from "./Confinement.js"
import type * as ContainerLogs from "./ContainerLogs.js"
import * as ContainerStats from "./ContainerStats.js"
import { checkArgv, checkStopSignal, newId, now, readySandbox, sleep, type ContainerRecord as BaseRecord, ContainerTable, type Ending, type Live as LiveOf } from "./ContainerTable.js"
import { type Driver, type SandboxRecord as BaseSandbox, invalid, notFound, toRuntime as driverRuntime } from "./Driver.js"
import * as EnvSeal from "./EnvSeal.js"
import * as ExecOutput from "./ExecOutput.js"
import * as ExecSession from "./ExecSession.js"
import { FifoPool } from "./FifoPool.js"
import * as ImageBlobs from "./ImageBlobs.js"
import * as Cni from "./Cni.js"
import * as SandboxNetwork from "./SandboxNetwork.js"
import { IpamStore } from "./Ipam.js"
import { Launcher } from "./Launcher.js"
import * as NativeShim from "./NativeShim.js"
import * as NetworkPolicyEnforcer from "./NetworkPolicyEnforcer.js"
import * as Nftables from "./Nftables.js"
import * as NodeHiding from "./NodeHiding.js"
import { PodHolders } from "./PodHolders.js"
import * as PodNamespaces from "./PodNamespaces.js"
import { PodNetwork } from "./PodNetwork.js"
import * as PodNetworks from "./PodNetwork.js"
import * as Procfs from "./Procfs.js"
import { lockDataDir, loadRecords, readText, RecordWriter, unlockDataDir } from "./RecordFiles.js"
import * as RunDir from "./RunDir.js"
import * as Shim from "./Shim.js"
import type * as ShimFlag from "./ShimFlag.js"
import { exitCodeOf, signalOf } from "./Signals.js"
import { defaultPath } from "./Tools.js"

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
  /**
   * Pod networks by CNI plugins instead of the built-in bridge (Cni.ts): the network
   * configuration directory and the plugins' directories.
   */
  readonly cni?: { readonly confDir: string; readonly binDirs: ReadonlyArray<string> }
}

/** What the driver reports as its version. */
export const version = "0.1.0"

type ProcessId = Procfs.ProcessId

interface SandboxRecord extends BaseSandbox {
  /**
   * The pod's namespaces: the process that made them (`unshare`) and the holder, pid 1 inside (with
   * the sh chain unshare's child; the native holder is both).
   */
  holder?: { readonly unshare: ProcessId; readonly pid: number; readonly startTime: number }
  /** Container paths already bind-mounted in the pod's mount namespace. */
  mounts: Array<string>
  /** `network: pod`: its address, from the node's pod CIDR (the holder holds its network namespace). */
  network?: SandboxNetwork.Attached
  /** The uid its containers run as when they name none (Confinement.uidRange; root boxes only). */
  uid?: number
  /** The directories covered in its mount namespace (NodeHiding.ts), once they are. */
  hidden?: ReadonlyArray<string>
}

interface ContainerRecord extends BaseRecord {
  /** Placed in a cgroup (`<sandbox>/<container>`). */
  cgroup: boolean
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

type Live = LiveOf<ContainerRecord>


const processId = Procfs.processId
const kill = Procfs.signal


/** The process driver. Open it with `open`; it adopts what a previous box left running. */
export class ProcessDriver implements Driver {
  readonly info: Runtime.Info
  private readonly tools: Shim.Tools
  /** How containers start: `native`, or `sh` and why (for the box's start-up line). */
  readonly shim: string
  private readonly cg: Cgroups.Cgroups
  private readonly isolated: boolean
  private readonly rotation: ContainerLogs.Rotation
  private readonly sandboxes = new Map<string, SandboxRecord>()
  /** Its containers. */
  readonly table: ContainerTable<ContainerRecord>
  private readonly bootId = Procfs.bootId()
  private readonly launcher: Launcher
  private readonly records = new RecordWriter()
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
  /** Starts pods' namespace holders. */
  private readonly holders: PodHolders
  /** Pod networks (isolated, with iproute2): the bridge and veths, and the persisted IPAM. */
  private readonly podNet: PodNetwork | undefined
  private ipam: IpamStore | undefined
  /** How pod networks are linked: the bridge and IPAM, or CNI plugins (`options.cni`). */
  private readonly net: SandboxNetwork.SandboxNetwork | undefined

  private constructor(private readonly options: Options) {
    const root = process.getuid?.() === 0
    this.tools = Shim.hostTools()
    if (options.shim !== "sh") {
      const native = NativeShim.find(options.dataDir)
      if ("path" in native) this.tools = { ...this.tools, native: native.path }
      this.shim = "path" in native ? "native" : `sh (no native shim: ${native.reason})`
    } else this.shim = "sh"
    this.isolated =
      options.isolation !== "none" && root && this.tools.nsenter !== undefined && this.tools.unshare !== undefined
    this.cg = options.cgroups === "none" ? Cgroups.none : Cgroups.detect(options.dataDir)
    this.launcher = new Launcher(this.tools.sh, this.tools.native)
    this.holders = new PodHolders(this.tools, this.launcher, options.dataDir)
    this.rotation = options.logRotation ?? { maxBytes: 10 * 1024 * 1024, maxFiles: 2 }
    this.table = new ContainerTable<ContainerRecord>(
      { dir: join(options.dataDir, "containers"), rotation: this.rotation, bootId: this.bootId, records: this.records },
      {
        shimDir: (rec) => this.shimDir(rec),
        adopt: (rec) => this.adopt(rec),
        reap: (c, code) => this.reap(c, code),
        observe: (rec) => this.observe(rec),
        usage: (rec) => ContainerStats.usageOf(rec.cgroup ? this.cg.sample(`${rec.spec.sandboxId}/${rec.id}`) : undefined, rec.launcher?.pid),
        pids: (rec) => (rec.cgroup ? this.cg.pids(`${rec.spec.sandboxId}/${rec.id}`) : rec.launcher ? Procfs.tree(rec.launcher.pid).map((s) => s.pid) : [])
      },
      EnvSeal.make(randomBytes(32))
    )
    this.podNet = this.isolated && PodNetworks.available() ? new PodNetwork(options.bridge) : undefined
    // A CNI configuration that cannot be read stops the box at start, not at a pod's creation.
    const cni = options.cni === undefined || this.podNet === undefined ? undefined : new Cni.CniRunner(options.cni.binDirs, Cni.loadDir(options.cni.confDir))
    this.net = this.podNet === undefined ? undefined : new SandboxNetwork.SandboxNetwork(options.dataDir, this.tools.nsenter ?? "nsenter", this.podNet, () => this.ipam, cni)
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
    mkdirSync(join(options.dataDir, "containers"), { recursive: true, mode: 0o700 })
    mkdirSync(join(options.dataDir, "sandboxes"), { recursive: true, mode: 0o700 })
    lockDataDir(options.dataDir)
    RunDir.sweepRunDirs()
    d.runDir = RunDir.runDirFor(options.dataDir)
    d.launchDir = d.runDir === undefined ? undefined : RunDir.launchDirIn(d.runDir)
    d.holders.runDir = d.runDir
    d.holders.launchDir = d.launchDir
    // In the run directory when there is one: a FIFO moves into a container's by a rename.
    d.fifos = new FifoPool(join(d.runDir ?? options.dataDir, "fifos"), d.tools.mkfifo, d.launcher, d.launchDir ?? options.dataDir)
    for (const rec of loadRecords<SandboxRecord>(join(options.dataDir, "sandboxes"))) d.sandboxes.set(rec.id, rec)
    // The key in memory (/dev/shm) when there is a run directory: the disk alone never opens a record.
    d.table.load(EnvSeal.load(d.runDir ?? options.dataDir))
    // Addresses of sandboxes this box no longer has (it died between the two) are free again.
    if (d.net?.ownsAddresses === true) d.ipam = IpamStore.open(options.dataDir, new Set(d.sandboxes.keys()))
    d.table.startPolling(options.pollIntervalMs ?? 1000)
    d.checkNetworks()
    return d
  }

  /**
   * After a restart, CNI's CHECK of every re-adopted pod network: a network the plugins say is
   * broken (a flushed rule, a deleted bridge) is reported on the box's stderr.
   */
  private checkNetworks(): void {
    for (const rec of this.sandboxes.values()) {
      if (rec.network?.cni === undefined) continue
      void this.net?.check(this.netView(rec), rec.network).then((problem) => {
        if (problem !== undefined) console.error(`koder-fleet box: sandbox ${rec.id} (${rec.spec.namespace}/${rec.spec.name}): CNI CHECK failed: ${problem}`)
      })
    }
  }

  private get dataDir() {
    return this.options.dataDir
  }

  private containerDir(id: string) {
    return this.table.dirOf(id)
  }

  private shimDir(rec: ContainerRecord) {
    return rec.runDir ?? this.containerDir(rec.id)
  }

  /** Stop watching (containers keep running: the next box adopts them). */
  close(): void {
    this.table.close()
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
    // Pods' cgroups stay while they have processes; an empty base is not left behind.
    this.cg.release()
    unlockDataDir(this.dataDir)
  }

  // ---------------------------------------------------------------------------------------------
  // Adoption
  // ---------------------------------------------------------------------------------------------

  /** A running container a previous box left: how it was launched, if that box had not recorded it. */
  private adopt(rec: ContainerRecord): void {
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
  }

  private saveSandbox(rec: SandboxRecord): Promise<void> {
    return this.records.persist(join(this.dataDir, "sandboxes", `${rec.id}.json`), JSON.stringify(rec))
  }

  // ---------------------------------------------------------------------------------------------
  // Exit
  // ---------------------------------------------------------------------------------------------

  /** A container's process ended: kill what it left running, release its cgroup, say how it ended. */
  private async reap(c: Live, code: number | undefined): Promise<Ending> {
    const rec = c.rec
    // The main process is gone; whatever it left running goes with it (a container is its tree).
    await this.killTree(rec)
    const startError = readText(join(this.shimDir(rec), "start-error"))?.trim()
    const path = `${rec.spec.sandboxId}/${rec.id}`
    // The OOM killer's SIGKILL, not the box's (stop, remove, or a SIGKILL asked through `signal`).
    const oom = rec.cgroup && !c.killedByBox && this.cg.oomKilled(path)
    delete rec.main
    if (rec.cgroup) this.cg.remove(path)
    if (code === undefined && rec.launcher === undefined) return { oom, startError: { exitCode: 128, message: "the shim could not launch the process" } }
    if (code !== undefined && startError !== undefined && startError !== "") return { oom, startError: { exitCode: code, message: startError } }
    return { oom }
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
      rec.cgroup ? this.cg.killAll(path, 5_000, spared) : Procfs.killUntilGone(() => (root === undefined ? [] : Procfs.tree(root).filter((s) => s.pid !== rec.shim?.pid && !spared(s.pid))))
    await others()
    if (spare !== undefined) {
      for (let i = 0; i < 100 && Procfs.isAlive(spare.pid, spare.startTime); i++) await sleep(5)
      kill(spare, "SIGKILL")
      if (rec.cgroup) await this.cg.killAll(path)
      else if (root !== undefined) await Procfs.killUntilGone(() => Procfs.tree(root).filter((s) => s.pid !== rec.shim?.pid))
    }
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
      if (this.isolated) rec.holder = await this.holders.start(rec.id, (spec.hostname ?? spec.name).slice(0, 63), podNetwork, steps)
      if (podNetwork) rec.network = await this.net!.connect(this.netView(rec), spec.podCidr!)
      // After connect: the pod's resolv.conf is bound from the box's data dir.
      if (rec.holder !== undefined) this.hideNode(rec)
      if (podNetwork) PodNamespaces.openLowPorts(this.tools, rec.holder!.pid)
      await this.saveSandbox(rec)
    } catch (e) {
      this.sandboxes.delete(rec.id)
      if (rec.holder) kill({ pid: rec.holder.pid, startTime: rec.holder.startTime }, "SIGKILL")
      this.cg.remove(rec.id)
      this.podCgroups.delete(rec.id)
      // The CNI plugins undo a failed ADD themselves; an ADD that worked before a later step failed is deleted.
      if (podNetwork) void this.net?.disconnect(this.netView(rec), rec.network)
      if (e instanceof Runtime.Invalid) throw e
      throw e instanceof Runtime.Unavailable ? e : new Runtime.Unavailable({ message: `sandbox: ${String(e)}` })
    }
    return this.sandboxOf(rec)
  }

  /** The sandbox as its network sees it (the holder's pid only while it lives). */
  private netView(rec: SandboxRecord): SandboxNetwork.Sandbox {
    return { id: rec.id, spec: rec.spec, holderPid: rec.holder !== undefined && Procfs.isAlive(rec.holder.pid, rec.holder.startTime) ? rec.holder.pid : undefined }
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

  /** Cover the node's directories in a new pod's mount namespace (NodeHiding.ts); a pod that cannot be hidden from them does not start. */
  private hideNode(rec: SandboxRecord): void {
    // Only what exists now: a path of one made later is not translated for this pod's mounts.
    const dirs = NodeHiding.plan([this.dataDir, this.runDir, ...(this.options.hide ?? [])]).filter((d) => existsSync(d))
    rec.hidden = PodNamespaces.hideNode(this.tools, rec.id, rec.holder!.pid, dirs)
  }

  /**
   * The network namespace of a container's pod (`/proc/<holder>/ns/net`), when the pod has its
   * own (`network: pod`) and it is alive: where NetworkPolicy rules for the pod go.
   */
  podNetns(containerId: string): string | undefined {
    const sb = this.sandboxes.get(this.table.live(containerId).rec.spec.sandboxId)
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
    await Promise.all(this.table.ofSandbox(id).map((c) => this.removeContainer(c)))
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
    if (rec.network !== undefined) await this.net?.disconnect(this.netView(rec), rec.network)
    // A write still in flight would bring the record back after its removal.
    await this.records.remove(join(this.dataDir, "sandboxes", `${id}.json`))
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
      PodNamespaces.bindMount(this.tools, sb.holder.pid, sb.hidden ?? [], m)
      sb.mounts.push(m.containerPath)
    }
    if (sb.mounts.length !== before) await this.saveSandbox(sb)
  }

  // ---------------------------------------------------------------------------------------------
  // Containers
  // ---------------------------------------------------------------------------------------------

  async createContainer(spec: Runtime.ContainerSpec): Promise<Runtime.Container> {
    if (!this.sandboxes.has(spec.sandboxId)) throw notFound("sandbox", spec.sandboxId)
    if (spec.command.length === 0) throw invalid("command: required (the process driver runs host commands)")
    checkArgv(spec)
    if (spec.user !== undefined && !this.info.capabilities.runAsUser)
      throw invalid("user: this box cannot switch users (capabilities.runAsUser is false)")
    checkStopSignal(spec)
    this.table.assertNew(spec)
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
    this.table.track(rec)
    if (upgraded) await this.saveSandbox(sb)
    mkdirSync(this.containerDir(rec.id), { recursive: true, mode: 0o700 })
    if (rec.runDir !== undefined) mkdirSync(rec.runDir, { recursive: true, mode: 0o700 })
    await this.table.save(rec)
    return this.table.view(rec)
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

  private observe(rec: ContainerRecord): void {
    // The status's pid, for a view: isolated, the main process appears a moment after the start,
    // and a lookup reads /proc twice; every sync of a starting pod viewing its container made that
    // a cost per view, so views look at most every 100 ms (inspect and exec wait for it instead).
    const at = Date.now()
    if (rec.main === undefined && at - (this.mainLookedUp.get(rec.id) ?? 0) >= 100) {
      this.mainLookedUp.set(rec.id, at)
      if (this.findMain(rec) !== undefined) this.mainLookedUp.delete(rec.id)
    }
  }

  startContainer(id: string): Promise<Runtime.Container> {
    // A pod with namespaces is ready while its holder lives.
    return this.table.start(id, async (c) => this.launch(c, readySandbox(this.sandboxes, c.rec.spec, (sb) => !sb.holder || Procfs.isAlive(sb.holder.pid, sb.holder.startTime))))
  }

  private async launch(c: Live, sb: SandboxRecord): Promise<void> {
    const { rec } = c
    const { spec } = rec
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
      const writer = this.table.logWriter(rec)
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
    void this.table.save(rec)
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
    void this.table.save(rec)
    this.table.attach(c)
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
      void this.table.save(rec)
    }
    return main
  }

  async stopContainer(id: string, gracePeriodMs: number): Promise<Runtime.Container> {
    const c = await this.table.settle(id)
    if (c.rec.status.state === "running") {
      if (gracePeriodMs > 0) {
        const signal = (signalOf(c.rec.spec.stopSignal ?? "SIGTERM") ?? "SIGTERM") as NodeJS.Signals
        kill((await this.mainOf(c.rec, 1000)) ?? c.rec.launcher, signal)
      }
      if (!(await this.table.waitExit(c, Math.max(0, gracePeriodMs)))) {
        c.killedByBox = true
        await this.killTree(c.rec)
        if (!(await this.table.waitExit(c, 10_000))) throw new Runtime.Unavailable({ message: `container ${id} did not die` })
      }
    }
    return this.table.view(c.rec)
  }

  async signalContainer(id: string, signal: string): Promise<void> {
    const c = this.table.live(id)
    const name = signalOf(signal)
    if (name === undefined) throw invalid(`unknown signal ${signal}`)
    const main = c.rec.status.state === "running" ? await this.mainOf(c.rec, 1000) : undefined
    if (name === "SIGKILL") c.killedByBox = true
    if (main === undefined || !kill(main, name as NodeJS.Signals)) throw invalid(`container ${id} is not running`)
  }

  /** The context an exec in a running container starts from: its pod's, its environment. */
  private execContext(id: string, command: ReadonlyArray<string>, env: Readonly<Record<string, string>> | undefined) {
    const c = this.table.live(id)
    const rec = c.rec
    if (rec.status.state !== "running" || c.starting) throw invalid(`container ${id} is not running`)
    if (command.length === 0) throw invalid("command: required")
    const sb = this.sandboxes.get(rec.spec.sandboxId)
    const fullEnv: Record<string, string> = { PATH: defaultPath, ...rec.spec.env, ...env }
    if (rec.cgroup) fullEnv.FLEET_SHIM_CGROUPS = this.cg.procsFiles(`${rec.spec.sandboxId}/${rec.id}`).join(" ")
    return { rec, env: fullEnv, ctx: this.contextOf(sb, rec.spec) }
  }

  /** Kill an exec: the command's tree, then the command itself (nsenter when isolated; see killTree). */
  private killExec(pid: number | undefined, ctx: Shim.Context): void {
    const root = processId(pid)
    if (root && ctx.holderPid !== undefined)
      void Procfs.killUntilGone(() => Procfs.tree(root.pid).filter((s) => s.pid !== root.pid)).then(async () => {
        for (let i = 0; i < 100 && Procfs.isAlive(root.pid, root.startTime); i++) await sleep(5)
        kill(root, "SIGKILL")
        // What nsenter forked after the first pass (a kill right after the start) is still in its group.
        await Procfs.killUntilGone(() => Procfs.tree(root.pid))
      })
    else if (root) void Procfs.killUntilGone(() => Procfs.tree(root.pid))
  }

  async execContainer(id: string, request: Runtime.ExecRequest): Promise<Runtime.ExecResult> {
    const { rec, env, ctx } = this.execContext(id, request.command, request.env)
    const child = spawn(this.tools.sh, Shim.execArgv(this.tools, ctx, request.workingDir ?? rec.spec.workingDir ?? "", request.command), {
      detached: true,
      env,
      cwd: "/",
      stdio: ["pipe", "pipe", "pipe"]
    })
    await ExecOutput.spawned(child).catch((e) => {
      throw new Runtime.Unavailable({ message: `exec: ${String(e)}` })
    })
    const out = await ExecOutput.collect(child, request, () => this.killExec(child.pid, ctx))
    return { exitCode: exitCodeOf(out.code, out.signal), stdout: out.stdout, stderr: out.stderr, timedOut: out.timedOut }
  }

  async execSession(id: string, request: StreamSession.ExecStreamRequest): Promise<StreamSession.StreamSession> {
    const { rec, env, ctx } = this.execContext(id, request.command, request.env)
    const launch = { file: this.tools.sh, args: Shim.execArgv(this.tools, ctx, request.workingDir ?? rec.spec.workingDir ?? "", request.command), env, cwd: "/", detached: true }
    return ExecSession.open(launch, request, { kill: (child) => this.killExec(child.pid, ctx) })
  }

  attachSession(id: string, request: StreamSession.AttachRequest): Promise<StreamSession.StreamSession> {
    return Promise.resolve().then(() => this.table.attachStream(id, request))
  }

  async removeContainer(id: string): Promise<void> {
    const c = await this.table.remove(id, async (c) => {
      if (c.rec.status.state !== "running") return
      c.killedByBox = true
      await this.killTree(c.rec)
      await this.table.waitExit(c, 10_000)
    })
    if (c === undefined) return
    if (c.rec.cgroup) this.cg.remove(`${c.rec.spec.sandboxId}/${id}`)
    rmSync(this.containerDir(id), { recursive: true, force: true })
    if (c.rec.runDir !== undefined) rmSync(c.rec.runDir, { recursive: true, force: true })
    this.mainLookedUp.delete(id)
  }

  async inspectContainer(id: string): Promise<Runtime.Container> {
    const c = this.table.live(id)
    await this.table.refresh(c)
    // Isolated, the main process is nsenter's child, a moment behind a start: an inspection
    // (the kbox API answers a start with one) waits for it. A start itself does not: polling
    // /proc for it made every start of a burst slower, and the agent never asks for the pid.
    if (c.rec.isolated === true && c.starting === undefined) await this.mainOf(c.rec, 500)
    return this.table.view(c.rec)
  }

  applyNetworkPolicy(id: string, rules: Runtime.NetworkPolicyRules): Promise<Runtime.NetworkPolicyApplied> {
    return NetworkPolicyEnforcer.applyToPod(this.podNetns(id), rules)
  }

  /** Image operations: rootfs tarballs stored by digest (the runc driver runs them; this one keeps them). */
  get images(): Runtime.Images {
    return ImageBlobs.images(this.dataDir)
  }
}


/** The driver as core's Runtime service. */
export const toRuntime = (d: ProcessDriver): Runtime.RuntimeService => driverRuntime(d, d.images)
