/**
 * The box's container table, one per driver: the records of its containers (persisted as
 * `<dir>/<id>/state.json`, their environment sealed), their re-adoption when a box starts, exit
 * detection (the shim's `exit` file, a watch, a poll), finalization, logs, stats and waiting.
 * A driver only says how a container is launched, killed and exec'd, through its `Hooks`.
 *
 *   create ─▶ track + save (created)       start (driver) ─▶ attach: watch `exit`, log Writer
 *   exit   ─▶ refresh ─▶ finalize: hooks.reap (kill leftovers, OOM?) ─▶ drain logs ─▶ save (exited)
 *   load   ─▶ records ─▶ lost (host rebooted, key gone) | hooks.adopt ─▶ attach or finalize
 */
import { Runtime, StreamSession } from "@koder/fleet-core"
import { Effect, Stream } from "effect"
import { randomBytes } from "node:crypto"
import { existsSync, readdirSync, statSync, watch, type FSWatcher } from "node:fs"
import { join } from "node:path"
import * as ContainerLogs from "./ContainerLogs.js"
import * as ContainerStats from "./ContainerStats.js"
import { invalid, notFound } from "./Driver.js"
import * as EnvSeal from "./EnvSeal.js"
import * as Procfs from "./Procfs.js"
import { readText, type RecordWriter } from "./RecordFiles.js"
import { signalOf, signalOfExit } from "./Signals.js"

// Output queued for one attached client before it is cut off.
const maxAttachBacklog = 8 * 1024 * 1024

/** What every driver records of a container. */
export interface ContainerRecord {
  readonly id: string
  readonly spec: Runtime.ContainerSpec
  readonly createdAt: string
  readonly bootId: string
  status: Runtime.ContainerStatus
  /** The pinned image it runs (`Runtime.Container.imageRef`). */
  imageRef?: string
  /** The supervisor outside the container that records its exit status in `exit`. */
  shim?: Procfs.ProcessId
}

/** A container's live bookkeeping beside its record. */
export interface Live<R extends ContainerRecord> {
  rec: R
  writer: ContainerLogs.Writer | undefined
  /** Watches the shim's directory for its `exit` file. */
  watcher: FSWatcher | undefined
  starting: Promise<void> | undefined
  finalizing: Promise<void> | undefined
  exited: Promise<void>
  markExited: () => void
  lastCpu: ContainerStats.CpuMark | undefined
  /** The box itself SIGKILLed the container: a 137 is then not the OOM killer's. */
  killedByBox: boolean
}

/** How a container ended, as its driver found out while reaping it. */
export interface Ending {
  /** The memory limit's OOM killer ended it: a 137 is then `OOMKilled`. */
  readonly oom: boolean
  /** It never ran: `StartError` with this code and message. */
  readonly startError?: { readonly exitCode: number; readonly message: string }
}

/** What differs between drivers. */
export interface Hooks<R extends ContainerRecord> {
  /** The directory of the shim's files: `exit`, and the `stdout.fifo`/`stderr.fifo` the log is read from. */
  readonly shimDir: (rec: R) => string
  /** A running record a previous box left, before it is followed: find what it had not recorded yet. */
  readonly adopt: (rec: R) => void
  /** Its process ended (`code` from `exit`): kill what is left, release what it held, say how it ended. */
  readonly reap: (c: Live<R>, code: number | undefined) => Promise<Ending>
  /** Before each view: look for what appears after a start (the main process's pid). */
  readonly observe: (rec: R) => void
  /** Resource usage of a running container. */
  readonly usage: (rec: R) => ContainerStats.Usage
  /** The host pids of a running container's processes. */
  readonly pids: (rec: R) => ReadonlyArray<number> | Promise<ReadonlyArray<number>>
}

/** Where and how the table keeps its containers. */
export interface Options {
  /** The directory of the containers' directories. */
  readonly dir: string
  readonly rotation: ContainerLogs.Rotation
  readonly bootId: string
  /** Writes the records (shared with the driver's own, e.g. sandboxes). */
  readonly records: RecordWriter
}

/** The time now, as records keep it (RFC 3339 with milliseconds). */
export const now = (): string => new Date().toISOString()
/** Resolve after `ms`. */
export const sleep = (ms: number): Promise<void> => new Promise<void>((r) => setTimeout(r, ms))
/** A new sandbox or container id. */
export const newId = (): string => randomBytes(8).toString("hex")

/**
 * The exit status the shim recorded, once complete: it writes "<code>\n" in one write, but the
 * file exists (empty) a moment before, and a watcher can see it then.
 */
export const exitCodeIn = (dir: string): number | undefined => {
  const file = join(dir, "exit")
  // Asked of every running container each second: an existence check is cheaper than the error of
  // reading a file that is not there.
  if (!existsSync(file)) return undefined
  const m = /^(\d+)\n$/.exec(readText(file) ?? "")
  return m ? Number(m[1]) : undefined
}

/** Refuse what no driver can pass to a process: bad variable names, NUL bytes. */
export const checkArgv = (spec: Runtime.ContainerSpec): void => {
  for (const [k, v] of Object.entries(spec.env ?? {}))
    if (k === "" || k.includes("=") || k.includes("\0") || v.includes("\0"))
      throw invalid(`env: invalid variable ${JSON.stringify(k)} (no "=" in names, no NUL anywhere)`)
  for (const a of [...spec.command, ...(spec.args ?? []), spec.workingDir ?? ""])
    if (a.includes("\0")) throw invalid("command, args, workingDir: no NUL characters")
}

/** Refuse a stop signal this host does not know. */
export const checkStopSignal = (spec: Runtime.ContainerSpec): void => {
  if (spec.stopSignal !== undefined && signalOf(spec.stopSignal) === undefined)
    throw invalid(`stopSignal: unknown signal ${spec.stopSignal}`)
}

/** The sandbox a container is started in; `Invalid` when it is gone or not `ready`. */
export const readySandbox = <S extends { readonly id: string }>(
  sandboxes: ReadonlyMap<string, S>,
  spec: Runtime.ContainerSpec,
  ready: (sb: S) => boolean
): S => {
  const sb = sandboxes.get(spec.sandboxId)
  if (sb === undefined) throw invalid(`sandbox ${spec.sandboxId} is gone`)
  if (!ready(sb)) throw invalid(`sandbox ${sb.id} is not ready: its namespaces are gone`)
  return sb
}

/** A driver's containers. */
export class ContainerTable<R extends ContainerRecord> {
  private readonly containers = new Map<string, Live<R>>()
  /** Each container's sealed environment, sealed once at its create (or its load). */
  private readonly sealedEnvs = new Map<string, string>()
  /** Seals containers' environments in their records (EnvSeal: no Secret value on disk in the clear). */
  private envSeal: EnvSeal.EnvSeal
  private poller: NodeJS.Timeout | undefined
  private closed = false

  constructor(
    private readonly options: Options,
    private readonly hooks: Hooks<R>,
    envSeal: EnvSeal.EnvSeal
  ) {
    this.envSeal = envSeal
  }

  /** A container's directory: its record and its log. */
  dirOf(id: string): string {
    return join(this.options.dir, id)
  }

  private recordFile(id: string): string {
    return join(this.dirOf(id), "state.json")
  }

  get(id: string): Live<R> | undefined {
    return this.containers.get(id)
  }

  /** The container, or `NotFound`. */
  live(id: string): Live<R> {
    const c = this.containers.get(id)
    if (c === undefined) throw notFound("container", id)
    return c
  }

  values(): IterableIterator<Live<R>> {
    return this.containers.values()
  }

  /** The ids of a sandbox's containers. */
  ofSandbox(sandboxId: string): Array<string> {
    return [...this.containers.values()].filter((c) => c.rec.spec.sandboxId === sandboxId).map((c) => c.rec.id)
  }

  /** `AlreadyExists` when the (sandbox, name, attempt) of `spec` has a container. */
  assertNew(spec: Runtime.ContainerSpec): void {
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

  /** Keep a record in the table (claimed before any await, so a concurrent create sees it). */
  track(rec: R): Live<R> {
    let markExited = () => {}
    const exited = new Promise<void>((r) => (markExited = r))
    const live: Live<R> = {
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

  /** Persist a container's record; callers await it where it must be on disk before they go on. */
  save(rec: R): Promise<void> {
    return this.options.records.persist(this.recordFile(rec.id), JSON.stringify(EnvSeal.toDisk(rec, this.sealedEnvOf(rec))))
  }

  /** The container's environment sealed (once: its records are written several times a start). */
  private sealedEnvOf(rec: R): string | undefined {
    const env = rec.spec.env
    if (env === undefined || Object.keys(env).length === 0) return undefined
    let sealed = this.sealedEnvs.get(rec.id)
    if (sealed === undefined) {
      sealed = this.envSeal.seal(env)
      this.sealedEnvs.set(rec.id, sealed)
    }
    return sealed
  }

  /** The status of a container whose exit status is gone. */
  lost(rec: R, why: string): Runtime.ContainerStatus {
    return {
      state: "exited",
      exitCode: 255,
      reason: "Lost",
      message: `exit status unknown: ${why}`,
      ...(rec.status.startedAt === undefined ? {} : { startedAt: rec.status.startedAt }),
      finishedAt: now()
    }
  }

  /**
   * Load the records a previous box left (its environment opened with `envSeal`) and follow the
   * running ones again; returns the ids of those that were running.
   */
  load(envSeal: EnvSeal.EnvSeal): Array<string> {
    this.envSeal = envSeal
    const running: Array<string> = []
    for (const id of readdirSync(this.options.dir)) {
      const text = readText(this.recordFile(id))
      if (text === undefined) continue
      let rec: R
      let envLost = false
      try {
        const opened = EnvSeal.fromDisk(JSON.parse(text) as R & { sealedEnv?: string }, envSeal)
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
      running.push(rec.id)
      if (rec.bootId !== this.options.bootId) {
        // The host rebooted: nothing of it survives, and its exit status is gone with it.
        rec.status = this.lost(rec, "the host restarted")
        void this.save(rec)
        live.markExited()
        continue
      }
      this.hooks.adopt(rec)
      if (Procfs.alive(rec.shim)) this.attach(live)
      else void this.refresh(live)
    }
    return running
  }

  /** Look at running containers every `ms`, for exits no event reported. */
  startPolling(ms: number): void {
    this.poller = setInterval(() => this.pollAll(), ms)
    this.poller.unref()
  }

  /** Stop following containers (they keep running: the next box adopts them). */
  close(): void {
    this.closed = true
    if (this.poller) clearInterval(this.poller)
    for (const c of this.containers.values()) {
      c.writer?.close()
      c.writer = undefined
      c.watcher?.close()
      c.watcher = undefined
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
  refresh(c: Live<R>): Promise<void> {
    if (c.finalizing) return c.finalizing
    // A closed table leaves every end to the next box (a shim it started still reports its exit to it).
    if (this.closed) return Promise.resolve()
    if (c.rec.status.state !== "running" || c.starting !== undefined) return Promise.resolve()
    const done = exitCodeIn(this.hooks.shimDir(c.rec)) !== undefined || !Procfs.alive(c.rec.shim)
    if (!done) return Promise.resolve()
    c.finalizing = this.finalize(c).finally(() => (c.finalizing = undefined))
    return c.finalizing
  }

  /** Record how the container ended; leave no process and no unread output behind. */
  private async finalize(c: Live<R>): Promise<void> {
    const rec = c.rec
    const dir = this.hooks.shimDir(rec)
    // The shim writes `exit` just before it ends: give a shim that is exiting a moment.
    for (let i = 0; i < 50 && exitCodeIn(dir) === undefined && Procfs.alive(rec.shim); i++) await sleep(10)
    const code = exitCodeIn(dir)
    const ending = await this.hooks.reap(c, code)
    if (c.writer) {
      // Every writer is gone now: take the rest of the output from the pipes and end the log.
      c.writer.drainNow()
      c.writer.close()
      c.writer = undefined
    }
    c.watcher?.close()
    c.watcher = undefined
    let finishedAt = now()
    try {
      finishedAt = statSync(join(dir, "exit")).mtime.toISOString()
    } catch {
      // no exit file: now
    }
    rec.status = this.exitStatus(rec, code, ending, finishedAt)
    await this.save(rec)
    c.markExited()
  }

  private exitStatus(rec: R, code: number | undefined, ending: Ending, finishedAt: string): Runtime.ContainerStatus {
    const startedAt = rec.status.startedAt === undefined ? {} : { startedAt: rec.status.startedAt }
    if (ending.startError !== undefined)
      return { state: "exited", exitCode: ending.startError.exitCode, reason: "StartError", message: ending.startError.message, ...startedAt, finishedAt }
    if (code === undefined) return this.lost(rec, "the shim ended without recording it")
    const signal = signalOfExit(code)
    return {
      state: "exited",
      exitCode: code,
      reason: ending.oom && code === 137 ? "OOMKilled" : Runtime.reasonOfExit(code),
      ...(signal === undefined ? {} : { signal }),
      ...startedAt,
      finishedAt
    }
  }

  /** Wait up to `ms` for a running container to exit, checking rather than trusting events. */
  async waitExit(c: Live<R>, ms: number): Promise<boolean> {
    const end = Date.now() + ms
    for (;;) {
      await this.refresh(c)
      if (c.rec.status.state === "exited") return true
      const left = end - Date.now()
      if (left <= 0) return false
      await Promise.race([c.exited, sleep(Math.min(left, 25))])
    }
  }

  /** A log writer for the container (its log in its directory, its FIFOs in the shim's). */
  logWriter(rec: R): ContainerLogs.Writer {
    return new ContainerLogs.Writer(this.dirOf(rec.id), this.options.rotation, this.hooks.shimDir(rec))
  }

  /**
   * Follow a running container: read its output, and watch for its `exit` file (the shim is
   * not the box's child, so no exit event comes; the FIFOs' end of file does not always either).
   */
  attach(c: Live<R>): void {
    const dir = this.hooks.shimDir(c.rec)
    try {
      c.watcher = watch(dir, (_event, name) => {
        if (name === "exit") void this.refresh(c)
      })
      c.watcher.on("error", () => undefined)
    } catch {
      // the poll remains
    }
    // Attached before the launch (FIFOs from a pool): the exit file ends it, with finalize's drain.
    if (c.writer !== undefined) {
      if (existsSync(join(dir, "exit"))) void this.refresh(c)
      return
    }
    if (!existsSync(join(dir, "stdout.fifo")) || !existsSync(join(dir, "stderr.fifo"))) return
    const writer = this.logWriter(c.rec)
    c.writer = writer
    // Both FIFOs at end of file: the shim (and everything holding them) has ended.
    void writer.attach().then(() => this.refresh(c))
    // It may have ended before the watch began.
    if (existsSync(join(dir, "exit"))) void this.refresh(c)
  }

  // ---------------------------------------------------------------------------------------------
  // The Runtime port's reads, and the shared halves of stop and remove
  // ---------------------------------------------------------------------------------------------

  /** A container as the port shows it. */
  view(rec: R): Runtime.Container {
    this.hooks.observe(rec)
    return { id: rec.id, spec: rec.spec, status: rec.status, createdAt: rec.createdAt, ...(rec.imageRef === undefined ? {} : { imageRef: rec.imageRef }) }
  }

  async list(filter?: Runtime.ContainerFilter): Promise<Array<Runtime.Container>> {
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

  async inspect(id: string): Promise<Runtime.Container> {
    const c = this.live(id)
    await this.refresh(c)
    return this.view(c.rec)
  }

  /** Start a created container once, by `launch`; a container runs once. */
  async start(id: string, launch: (c: Live<R>) => Promise<void>): Promise<Runtime.Container> {
    const c = this.live(id)
    if (c.rec.status.state !== "created" || c.starting !== undefined)
      throw invalid(`container ${id} is ${c.starting ? "starting" : c.rec.status.state}; a container runs once`)
    c.starting = launch(c).finally(() => (c.starting = undefined))
    await c.starting
    await this.refresh(c)
    return this.view(c.rec)
  }

  /**
   * A container about to be stopped: its start over, its exit noticed. One that never started is
   * closed here (as the CRI does); a running one the driver stops.
   */
  async settle(id: string): Promise<Live<R>> {
    const c = this.live(id)
    if (c.starting) await c.starting.catch(() => undefined)
    await this.refresh(c)
    if (c.rec.status.state === "created") {
      c.rec.status = { state: "exited", exitCode: 0, reason: "Completed", finishedAt: now() }
      await this.save(c.rec)
      c.markExited()
    }
    return c
  }

  /**
   * Take a container out of the table once `end` (after its start is over) has stopped it; its
   * record's writes are done when this settles, so the driver may remove its files. Undefined
   * when there is no such container.
   */
  async remove(id: string, end: (c: Live<R>) => Promise<void>): Promise<Live<R> | undefined> {
    const c = this.containers.get(id)
    if (c === undefined) return undefined
    if (c.starting) await c.starting.catch(() => undefined)
    await end(c)
    c.writer?.close()
    c.watcher?.close()
    this.containers.delete(id)
    // A record write in flight would put a file back into the directory while it is removed.
    await this.options.records.flushed(this.recordFile(id))
    this.options.records.forget(this.recordFile(id))
    this.sealedEnvs.delete(id)
    return c
  }

  logs(id: string, options: Runtime.LogOptions = {}): Stream.Stream<Runtime.LogChunk, Runtime.NotFound> {
    return Stream.unwrap(
      Effect.sync(() => {
        const c = this.containers.get(id)
        if (c === undefined) return Stream.fail(notFound("container", id))
        const timestamps = options.timestamps === true
        const dir = this.dirOf(id)
        return Stream.asyncPush<Runtime.LogChunk>((emit) =>
          Effect.acquireRelease(
            Effect.sync(() => {
              // Read the file and subscribe in one synchronous step: no line falls in between.
              for (const l of ContainerLogs.read(dir, this.options.rotation, options, Date.now()))
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

  /**
   * `attach` to a running container: its output from now on, on stdout (1) and stderr (2), then
   * how it ended (3). The output comes from the log writer, which never waits for a reader: an
   * attached client that falls this far behind is cut off rather than holding the box's memory.
   * Containers are created without a standard input of their own, so stdin frames go nowhere.
   */
  attachStream(id: string, _request: StreamSession.AttachRequest): StreamSession.StreamSession {
    const c = this.live(id)
    if (c.rec.status.state !== "running" || c.writer === undefined) throw invalid(`container ${id} is not running`)
    const out = StreamSession.queue()
    const encoder = new TextEncoder()
    let unlisten = (): void => undefined
    const finish = (status: Record<string, unknown>) => {
      if (out.ended()) return
      unlisten()
      out.push(StreamSession.statusFrame(status))
      out.end()
    }
    unlisten = c.writer.listen((l) => {
      if (out.ended()) return
      out.push({ channel: l.stream === "stdout" ? StreamSession.Channel.stdout : StreamSession.Channel.stderr, data: encoder.encode(l.line) })
      if (out.pending() > maxAttachBacklog) finish(StreamSession.failureStatus("attach: the client fell too far behind the container's output"))
    })
    void c.exited.then(() => finish(StreamSession.exitStatus(c.rec.status.state === "exited" ? (c.rec.status.exitCode ?? 0) : 0)))
    return {
      send: () => undefined,
      frames: out.frames,
      close: () => {
        unlisten()
        out.end()
      }
    }
  }

  stats(id: string): Runtime.Stats {
    const c = this.live(id)
    if (c.rec.status.state !== "running") throw invalid(`container ${id} is not running`)
    const at = Date.now()
    const { stats, mark } = ContainerStats.statsOf(this.hooks.usage(c.rec), c.rec.status.startedAt, c.lastCpu, at)
    c.lastCpu = mark
    return stats
  }

  async processes(id: string): Promise<Array<Runtime.Process>> {
    const rec = this.live(id).rec
    if (rec.status.state !== "running") return []
    return ContainerStats.processesOf(await this.hooks.pids(rec))
  }
}
