/**
 * The Runtime contract suite: what every runtime behind the port (runtime/Runtime.ts) must show,
 * run against the memory runtime, the box's process driver (through kbox-client) and its runc
 * driver: `RuntimeContract.suite("memory", MemoryRuntime.layer({ behavior }))`. Each test builds
 * the layer afresh, makes its own pod (a unique pod uid) and removes it at the end.
 *
 * Workloads are shell scripts (`sh -c`) labelled with their name (`workloadLabel`): a real runtime
 * runs them, the memory runtime plays them from the label (`Workloads` says what each does).
 */
import { Chunk, Duration, Effect, Either, Fiber, Layer, Schedule, Stream } from "effect"
import { describe, expect, it } from "vitest"
import * as Runtime from "../runtime/Runtime.js"
import * as StreamSession from "../runtime/StreamSession.js"

/** The label naming a container's contract workload. */
export const workloadLabel = "contract.fleet.koder.dev/workload"

/** The contract's workloads: what each script does, for a runtime that simulates them. */
export const Workloads = {
  /** Writes `out` to stdout and `err` to stderr, then exits 3. */
  exit3: "echo out; echo err >&2; exit 3",
  /** Writes `ready`, then runs until stopped; the stop signal (SIGTERM) makes it exit 0. */
  server: "trap 'exit 0' TERM; echo ready; while :; do sleep 1; done",
  /** Writes `ready`, then runs until killed (it ignores SIGTERM). */
  stubborn: "trap '' TERM; echo ready; while :; do sleep 1; done"
} as const

/** A workload's name. */
export type Workload = keyof typeof Workloads

/** The command of the contract's exec: writes `hi` and exits 4. */
export const execCommand: ReadonlyArray<string> = ["sh", "-c", "echo hi; exit 4"]

/** The contract's streaming exec with stdin: echoes its stdin, writes `err` to stderr, exits 5. */
export const stdinCommand: ReadonlyArray<string> = ["sh", "-c", "cat; echo err >&2; exit 5"]

/** A command no runtime finds: starting it is a `StartError`. */
export const missingCommand = "/nonexistent/contract-command"

/** How a runtime runs the contract. */
export interface Options {
  /** Fields every container spec gets (the runc driver needs an `image`). */
  readonly container?: Partial<Runtime.ContainerSpec>
  /** Per-test time limit in ms (default 60 s). */
  readonly timeout?: number
}

type Test = (rt: Runtime.RuntimeService, pod: Pod) => Effect.Effect<void, unknown>

/** The test's pod and how to make containers in it. */
interface Pod {
  readonly sandbox: Runtime.Sandbox
  /** Create (not start) a container running `workload` (or the missing command). */
  readonly create: (name: string, workload: Workload | "missing", attempt?: number) => Effect.Effect<string, Runtime.RuntimeError>
  /** Create and start one. */
  readonly run: (name: string, workload: Workload) => Effect.Effect<string, Runtime.RuntimeError>
}

/** The tag of a failure, or "success". */
const outcome = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.either(effect), (e) => (Either.isLeft(e) ? (e.left as { readonly _tag?: string })._tag : "success"))

/** Poll `check` every 20 ms until it answers something (20 s at most). */
const poll = <A, E>(check: Effect.Effect<A | undefined, E>, what: string): Effect.Effect<A, E | Error> =>
  check.pipe(
    Effect.flatMap((a) => (a === undefined ? Effect.fail("again" as const) : Effect.succeed(a))),
    Effect.retry({ while: (e) => e === "again", schedule: Schedule.spaced(Duration.millis(20)) }),
    Effect.catchIf((e): e is "again" => e === "again", () => Effect.fail(new Error(what))),
    Effect.timeoutFail({ duration: Duration.seconds(20), onTimeout: () => new Error(`timed out: ${what}`) })
  )

/** The status of a container once it has exited. */
const exited = (rt: Runtime.RuntimeService, id: string) =>
  poll(
    Effect.map(rt.containers.inspect(id), (c) => (c.status.state === "exited" ? c.status : undefined)),
    `container ${id} to exit`
  )

/** Wait until the container's log holds `line`. */
const logged = (rt: Runtime.RuntimeService, id: string, line: string) =>
  poll(
    Effect.map(Stream.runCollect(rt.containers.logs(id)), (c) => (Chunk.toReadonlyArray(c).some((l) => l.line === `${line}\n`) || undefined)),
    `"${line}" in the log of ${id}`
  )

/** What a session sent until it ended: the text of stdout and stderr, and how its Status says it ended. */
export const drain = (session: StreamSession.StreamSession) =>
  Effect.promise(async () => {
    const decoder = new TextDecoder()
    const text: Record<number, string> = {}
    let outcome: ReturnType<typeof StreamSession.outcomeOf> | undefined
    for await (const f of session.frames) {
      if (f.channel === StreamSession.Channel.error) outcome = StreamSession.outcomeOf(f.data)
      else text[f.channel] = (text[f.channel] ?? "") + decoder.decode(f.data)
    }
    return { stdout: text[StreamSession.Channel.stdout] ?? "", stderr: text[StreamSession.Channel.stderr] ?? "", outcome }
  }).pipe(Effect.timeoutFail({ duration: Duration.seconds(20), onTimeout: () => new Error("timed out: the session to end") }))

/** The contract of streaming exec and attach (StreamSession frames). */
const streaming = (t: (title: string, test: Test) => void) => {
    t("a streaming exec relays output and stdin and ends with the exit code in its Status", (rt, pod) =>
      Effect.gen(function* () {
        const id = yield* pod.run("stream", "server")
        yield* logged(rt, id, "ready")
        const plain = yield* rt.containers.execStream(id, { command: execCommand, stdin: false, tty: false })
        expect(yield* drain(plain)).toEqual({ stdout: "hi\n", stderr: "", outcome: { exitCode: 4 } })
        const fed = yield* rt.containers.execStream(id, { command: stdinCommand, stdin: true, tty: false })
        fed.send(StreamSession.text(StreamSession.Channel.stdin, "one "))
        fed.send(StreamSession.text(StreamSession.Channel.stdin, "two\n"))
        fed.send(StreamSession.closeStdin)
        expect(yield* drain(fed)).toEqual({ stdout: "one two\n", stderr: "err\n", outcome: { exitCode: 5 } })
        expect(yield* outcome(rt.containers.execStream(id, { command: [], stdin: false, tty: false }))).toBe("RuntimeInvalid")
        yield* rt.containers.stop(id, { gracePeriodMs: 0 })
        expect(yield* outcome(rt.containers.execStream(id, { command: execCommand, stdin: false, tty: false }))).toBe("RuntimeInvalid")
        expect(yield* outcome(rt.containers.execStream("no-such-container", { command: execCommand, stdin: false, tty: false }))).toBe("RuntimeNotFound")
      }))

    t("attach follows a running container until it stops; refused once it exited", (rt, pod) =>
      Effect.gen(function* () {
        const id = yield* pod.run("attached", "server")
        yield* logged(rt, id, "ready")
        const session = yield* rt.containers.attach(id, { stdin: false, tty: false })
        const ended = yield* Effect.fork(drain(session))
        yield* rt.containers.stop(id, { gracePeriodMs: 5_000 })
        yield* Fiber.join(ended)
        expect(yield* outcome(rt.containers.attach(id, { stdin: false, tty: false }))).toBe("RuntimeInvalid")
        expect(yield* outcome(rt.containers.attach("no-such-container", { stdin: false, tty: false }))).toBe("RuntimeNotFound")
      }))
}

/** Register the contract tests for one runtime under `describe("Runtime contract: <name>")`. */
export const suite = (name: string, layer: Layer.Layer<Runtime.Runtime, unknown>, options: Options = {}) => {
  const podSpec = (): Runtime.SandboxSpec => ({
    podUid: `contract-${Math.random().toString(36).slice(2, 10)}`,
    name: "contract",
    namespace: "default",
    network: "host"
  })

  const run = (test: Test) => () =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const rt = yield* Runtime.Runtime
          const sandbox = yield* Effect.acquireRelease(rt.sandboxes.create(podSpec()), (s) =>
            Effect.ignore(rt.sandboxes.remove(s.id))
          )
          const create = (cname: string, workload: Workload | "missing", attempt = 0) =>
            rt.containers.create({
              ...options.container,
              sandboxId: sandbox.id,
              name: cname,
              attempt,
              command: workload === "missing" ? [missingCommand] : ["sh", "-c", Workloads[workload]],
              labels: { [workloadLabel]: workload, [Runtime.Labels.containerName]: cname }
            })
          const runIt = (cname: string, workload: Workload) =>
            Effect.tap(create(cname, workload), (id) => rt.containers.start(id))
          yield* test(rt, { sandbox, create, run: runIt })
        }).pipe(Effect.provide(Layer.fresh(layer)))
      ) as Effect.Effect<void, unknown>
    )
  const t = (title: string, test: Test) => it(title, run(test), options.timeout ?? 60_000)

  describe(`Runtime contract: ${name}`, () => {
    t("a container goes created → running → exited once, with its exit code, reason and times", (rt, pod) =>
      Effect.gen(function* () {
        const id = yield* pod.create("once", "exit3")
        const created = yield* rt.containers.inspect(id)
        expect(created).toMatchObject({ id, status: { state: "created" }, spec: { name: "once", sandboxId: pod.sandbox.id } })
        yield* rt.containers.start(id)
        const status = yield* exited(rt, id)
        expect(status).toMatchObject({ state: "exited", exitCode: 3, reason: "Error" })
        expect(status.pid).toBeUndefined()
        expect(Date.parse(status.finishedAt!)).toBeGreaterThanOrEqual(Date.parse(status.startedAt!))
        // A container runs once: a second start is refused.
        expect(yield* outcome(rt.containers.start(id))).toBe("RuntimeInvalid")
      }))

    t("logs hold stdout and stderr lines, with timestamps when asked and the last n with tailLines", (rt, pod) =>
      Effect.gen(function* () {
        const id = yield* pod.run("talker", "exit3")
        yield* exited(rt, id)
        const lines = Chunk.toReadonlyArray(yield* Stream.runCollect(rt.containers.logs(id)))
        expect([...lines].sort((a, b) => a.stream.localeCompare(b.stream))).toEqual([
          { stream: "stderr", line: "err\n" },
          { stream: "stdout", line: "out\n" }
        ])
        const tail = Chunk.toReadonlyArray(yield* Stream.runCollect(rt.containers.logs(id, { tailLines: 1, timestamps: true })))
        expect(tail).toHaveLength(1)
        expect(Number.isNaN(Date.parse(tail[0]!.timestamp ?? ""))).toBe(false)
      }))

    t("a followed log delivers the output and ends when the container exits", (rt, pod) =>
      Effect.gen(function* () {
        const id = yield* pod.run("followed", "server")
        yield* logged(rt, id, "ready")
        const follow = yield* Effect.fork(Stream.runCollect(rt.containers.logs(id, { follow: true })))
        yield* rt.containers.stop(id, { gracePeriodMs: 0 })
        const lines = Chunk.toReadonlyArray(yield* Fiber.join(follow).pipe(Effect.timeout(Duration.seconds(20))))
        expect(lines.map((l) => l.line)).toContain("ready\n")
      }))

    t("stop sends the stop signal and returns the final status; it is idempotent", (rt, pod) =>
      Effect.gen(function* () {
        const id = yield* pod.run("server", "server")
        yield* logged(rt, id, "ready")
        expect((yield* rt.containers.inspect(id)).status.state).toBe("running")
        const status = yield* rt.containers.stop(id, { gracePeriodMs: 20_000 })
        expect(status).toMatchObject({ state: "exited", exitCode: 0, reason: "Completed" })
        expect(yield* rt.containers.stop(id, { gracePeriodMs: 20_000 })).toMatchObject({ state: "exited", exitCode: 0 })
      }))

    t("stop SIGKILLs what survives the grace period (137, SIGKILL); a grace of 0 kills at once", (rt, pod) =>
      Effect.gen(function* () {
        const stubborn = yield* pod.run("stubborn", "stubborn")
        yield* logged(rt, stubborn, "ready")
        expect(yield* rt.containers.stop(stubborn, { gracePeriodMs: 300 })).toMatchObject({ state: "exited", exitCode: 137, signal: "SIGKILL" })
        const killed = yield* pod.run("killed", "server")
        yield* logged(rt, killed, "ready")
        expect(yield* rt.containers.stop(killed, { gracePeriodMs: 0 })).toMatchObject({ state: "exited", exitCode: 137, signal: "SIGKILL" })
      }))

    t("stopping a created container closes its life without running it", (rt, pod) =>
      Effect.gen(function* () {
        const id = yield* pod.create("never", "server")
        expect(yield* rt.containers.stop(id, { gracePeriodMs: 1_000 })).toMatchObject({ state: "exited" })
        expect(yield* outcome(rt.containers.start(id))).toBe("RuntimeInvalid")
      }))

    t("exec runs a command in a running container and answers its code and output, refused once it exited", (rt, pod) =>
      Effect.gen(function* () {
        const id = yield* pod.run("exec", "server")
        yield* logged(rt, id, "ready")
        expect(yield* rt.containers.exec(id, { command: execCommand })).toEqual({ exitCode: 4, stdout: "hi\n", stderr: "", timedOut: false })
        yield* rt.containers.stop(id, { gracePeriodMs: 0 })
        expect(yield* outcome(rt.containers.exec(id, { command: execCommand }))).toBe("RuntimeInvalid")
      }))

    streaming(t)

    t("stats sample a running container and are refused once it exited", (rt, pod) =>
      Effect.gen(function* () {
        const id = yield* pod.run("stats", "server")
        yield* logged(rt, id, "ready")
        const stats = yield* rt.containers.stats(id)
        expect(Number.isNaN(Date.parse(stats.timestamp))).toBe(false)
        expect(stats.pids).toBeGreaterThanOrEqual(1)
        expect(stats.cpu.usageCoreNanoSeconds).toBeGreaterThanOrEqual(0)
        expect(stats.memory.workingSetBytes).toBeGreaterThanOrEqual(0)
        yield* rt.containers.stop(id, { gracePeriodMs: 0 })
        expect(yield* outcome(rt.containers.stats(id))).toBe("RuntimeInvalid")
      }))

    t("a command that cannot start is a StartError of the container, not of the call", (rt, pod) =>
      Effect.gen(function* () {
        const id = yield* pod.create("missing", "missing")
        yield* rt.containers.start(id)
        expect(yield* exited(rt, id)).toMatchObject({ state: "exited", reason: "StartError" })
      }))

    t("signals: an unknown one and a container that is not running are refused", (rt, pod) =>
      Effect.gen(function* () {
        const id = yield* pod.run("signalled", "server")
        yield* logged(rt, id, "ready")
        expect(yield* outcome(rt.containers.signal(id, "SIGNOTASIGNAL"))).toBe("RuntimeInvalid")
        yield* rt.containers.signal(id, "KILL")
        expect(yield* exited(rt, id)).toMatchObject({ exitCode: 137, signal: "SIGKILL" })
        expect(yield* outcome(rt.containers.signal(id, "SIGTERM"))).toBe("RuntimeInvalid")
      }))

    t("a second create of a pod's sandbox or a container's (name, attempt) is AlreadyExists with the id", (rt, pod) =>
      Effect.gen(function* () {
        const id = yield* pod.create("dup", "server")
        expect(yield* Effect.flip(pod.create("dup", "server"))).toMatchObject({ _tag: "RuntimeAlreadyExists", id })
        expect(yield* Effect.flip(rt.sandboxes.create(pod.sandbox.spec))).toMatchObject({ _tag: "RuntimeAlreadyExists", id: pod.sandbox.id })
        const next = yield* pod.create("dup", "server", 1)
        expect(next).not.toBe(id)
      }))

    t("list filters sandboxes by pod uid and containers by sandbox, name, labels and state", (rt, pod) =>
      Effect.gen(function* () {
        expect((yield* rt.sandboxes.list({ podUid: pod.sandbox.spec.podUid })).map((s) => s.id)).toEqual([pod.sandbox.id])
        expect(yield* rt.sandboxes.get(pod.sandbox.id)).toMatchObject({ id: pod.sandbox.id, state: "ready" })
        const a = yield* pod.run("a", "server")
        const b = yield* pod.create("b", "server")
        yield* logged(rt, a, "ready")
        const ids = (filter: Runtime.ContainerFilter) =>
          Effect.map(rt.containers.list(filter), (cs) => cs.map((c) => c.id).sort())
        expect(yield* ids({ sandboxId: pod.sandbox.id })).toEqual([a, b].sort())
        expect(yield* ids({ sandboxId: pod.sandbox.id, name: "b" })).toEqual([b])
        expect(yield* ids({ sandboxId: pod.sandbox.id, labels: { [Runtime.Labels.containerName]: "a" } })).toEqual([a])
        expect(yield* ids({ sandboxId: pod.sandbox.id, state: "running" })).toEqual([a])
        expect(yield* ids({ sandboxId: pod.sandbox.id, state: "created" })).toEqual([b])
      }))

    t("removing a sandbox removes its containers; removes of what is gone succeed", (rt, pod) =>
      Effect.gen(function* () {
        const id = yield* pod.run("doomed", "server")
        yield* logged(rt, id, "ready")
        yield* rt.sandboxes.remove(pod.sandbox.id)
        yield* rt.sandboxes.remove(pod.sandbox.id)
        yield* rt.containers.remove(id)
        expect(yield* outcome(rt.containers.inspect(id))).toBe("RuntimeNotFound")
        expect(yield* rt.containers.list({ sandboxId: pod.sandbox.id })).toEqual([])
        expect(yield* outcome(rt.sandboxes.get(pod.sandbox.id))).toBe("RuntimeNotFound")
        expect(yield* outcome(pod.create("late", "server"))).toBe("RuntimeNotFound")
      }))

    t("unknown ids are NotFound for every call that names one", (rt) =>
      Effect.gen(function* () {
        const id = "no-such-container"
        expect(yield* outcome(rt.sandboxes.get("no-such-sandbox"))).toBe("RuntimeNotFound")
        expect(yield* outcome(rt.containers.inspect(id))).toBe("RuntimeNotFound")
        expect(yield* outcome(rt.containers.start(id))).toBe("RuntimeNotFound")
        expect(yield* outcome(rt.containers.stop(id, { gracePeriodMs: 0 }))).toBe("RuntimeNotFound")
        expect(yield* outcome(rt.containers.signal(id, "SIGTERM"))).toBe("RuntimeNotFound")
        expect(yield* outcome(rt.containers.exec(id, { command: execCommand }))).toBe("RuntimeNotFound")
        expect(yield* outcome(rt.containers.stats(id))).toBe("RuntimeNotFound")
        expect(yield* outcome(rt.containers.processes(id))).toBe("RuntimeNotFound")
        expect(yield* outcome(Stream.runDrain(rt.containers.logs(id)))).toBe("RuntimeNotFound")
        // Removes are idempotent: what is gone is removed.
        expect(yield* outcome(rt.containers.remove(id))).toBe("success")
        expect(yield* outcome(rt.sandboxes.remove("no-such-sandbox"))).toBe("success")
      }))
  })
}
