/**
 * Verbs on workloads: `scale` (the scale subresource) and `rollout status|history|undo|restart|
 * pause|resume`. `rollout status` follows the Deployment by watch and prints kubectl's messages
 * (redrawn in place with a spinner on a TTY, one line per change otherwise) and exits non-zero on
 * a stalled rollout or at `--timeout`.
 */
import type { Command } from "commander"
import type { ApiError } from "@koder/fleet-core"
import { Duration, Effect, Option, Stream } from "effect"
import * as Age from "../Age.js"
import { CliError, usage } from "../CliError.js"
import { examples, meta, refOf, type Env } from "../Cli.js"
import * as Printers from "../Printers.js"
import * as Resources from "../Resources.js"
import * as Rollout from "../Rollout.js"
import { spinner, type Session, type Terminal } from "../Run.js"

type Json = Record<string, unknown>

const ReplicaSetRef = { apiVersion: "apps/v1", plural: "replicasets", namespaced: true }

/** `TYPE/NAME` or `TYPE NAME` to a resource and name. */
const target = (s: Session, args: ReadonlyArray<string>, verb: string) =>
  Effect.gen(function* () {
    const pairs = Resources.parseArgs(args)
    const pair = pairs[0]
    if (pair === undefined || pair.names.length !== 1 || pairs.length !== 1) return yield* Effect.fail(usage("required resource not specified: give TYPE/NAME or TYPE NAME", verb))
    const info = Resources.resolveOne(yield* s.resources(), pair.type)
    return { info, name: pair.names[0]!, namespace: info.namespaced ? s.namespace : undefined }
  })

const scale = (s: Session, t: Terminal, args: ReadonlyArray<string>, o: { replicas?: string }) =>
  Effect.gen(function* () {
    const replicas = Number(o.replicas)
    if (o.replicas === undefined || !Number.isInteger(replicas) || replicas < 0) return yield* Effect.fail(usage("The --replicas=COUNT flag is required, and COUNT must be greater than or equal to 0", "scale"))
    const x = yield* target(s, args, "scale")
    yield* s.conn.client.patch(refOf(x.info), x.namespace, x.name, "merge", { spec: { replicas } }, "scale")
    t.out(`${Resources.typeName(x.info)}/${x.name} scaled\n`)
  })

const statusOf = (kind: string, o: Json): Rollout.Status => (kind === "Deployment" ? Rollout.deploymentStatus(o) : Rollout.setStatus(kind, o))

const status = (s: Session, t: Terminal, args: ReadonlyArray<string>, o: { watch?: boolean; timeout?: string }) =>
  Effect.gen(function* () {
    const x = yield* target(s, args, "rollout status")
    if (!["Deployment", "StatefulSet", "DaemonSet"].includes(x.info.kind)) return yield* Effect.fail(new CliError({ message: `no status viewer has been implemented for ${x.info.kind}` }))
    const timeoutSeconds = o.timeout === undefined || o.timeout === "0" ? undefined : Age.parseDuration(o.timeout)
    const first = statusOf(x.info.kind, yield* s.conn.client.get(refOf(x.info), x.namespace, x.name))
    if (first.done || first.failed || o.watch === false) {
      if (first.failed) return yield* Effect.fail(new CliError({ message: first.message }))
      t.out(`${first.message}\n`)
      return
    }
    const spin = spinner(t)
    let last = ""
    const show = (st: Rollout.Status) => {
      if (st.message === last) return
      last = st.message
      if (t.tty && !st.done) spin.update(st.message)
      else {
        spin.stop()
        t.out(`${st.message}\n`)
      }
    }
    show(first)
    const follow = s.conn.client.watch(refOf(x.info), { ...(x.namespace === undefined ? {} : { namespace: x.namespace }), fieldSelector: `metadata.name=${x.name}` }).pipe(
      Stream.filter((e) => String(meta(e.object)["name"]) === x.name),
      Stream.mapEffect((e) => (e.type === "DELETED" ? Effect.fail(new CliError({ message: `${x.info.kind.toLowerCase()} "${x.name}" was deleted` })) : Effect.succeed(statusOf(x.info.kind, e.object)))),
      Stream.tap((st) => Effect.sync(() => show(st))),
      Stream.takeUntil((st) => st.done || st.failed === true),
      Stream.runLast
    )
    const bounded =
      timeoutSeconds === undefined
        ? follow
        : Effect.timeoutFail(follow, { duration: Duration.seconds(timeoutSeconds), onTimeout: () => new CliError({ message: `timed out waiting for the condition (${last})` }) })
    const ended = yield* Effect.ensuring(bounded, Effect.sync(() => spin.stop()))
    if (Option.isSome(ended) && ended.value.failed) return yield* Effect.fail(new CliError({ message: ended.value.message }))
  })

const replicaSetsOf = (s: Session, deployment: Json) =>
  Effect.map(s.conn.client.listAll(ReplicaSetRef, { namespace: String(meta(deployment)["namespace"]) }), (l) => Rollout.owned(deployment, l.items))

const deploymentOnly = (info: Resources.ResourceInfo, verb: string) =>
  info.kind === "Deployment" ? Effect.void : Effect.fail(new CliError({ message: `${verb} is only supported for deployments here, not ${info.kind}` }))

const history = (s: Session, t: Terminal, args: ReadonlyArray<string>, o: { revision?: string }) =>
  Effect.gen(function* () {
    const x = yield* target(s, args, "rollout history")
    yield* deploymentOnly(x.info, "rollout history")
    const d = yield* s.conn.client.get(refOf(x.info), x.namespace, x.name)
    const rss = yield* replicaSetsOf(s, d)
    if (o.revision !== undefined && Number(o.revision) > 0) {
      const rs = rss.find((r) => Rollout.revisionOf(r) === Number(o.revision))
      if (rs === undefined) return yield* Effect.fail(new CliError({ message: `unable to find the specified revision ${o.revision}` }))
      t.out(`${Resources.typeName(x.info)}/${x.name} with revision #${o.revision}\nPod Template:\n${Printers.yaml((rs["spec"] as Json)["template"]).replace(/^/gm, "  ")}`)
      return
    }
    t.out(`${Resources.typeName(x.info)}/${x.name}\n${Printers.align(Rollout.history(rss))}\n\n`)
  })

const undo = (s: Session, t: Terminal, args: ReadonlyArray<string>, o: { toRevision?: string }) =>
  Effect.gen(function* () {
    const x = yield* target(s, args, "rollout undo")
    yield* deploymentOnly(x.info, "rollout undo")
    // The template is chosen from the Deployment as read, and written only if it is still that
    // version; the controller's status writes during a rollout change the version, so a lost race
    // reads and chooses again (a few times) rather than failing the command.
    const attempt = Effect.gen(function* () {
      const d = yield* s.conn.client.get(refOf(x.info), x.namespace, x.name)
      const chosen = Rollout.undoTarget(d, yield* replicaSetsOf(s, d), Number(o.toRevision ?? 0))
      if (typeof chosen === "string") return yield* Effect.fail(new CliError({ message: chosen }))
      yield* s.conn.client.patch(refOf(x.info), x.namespace, x.name, "json", [
        { op: "test", path: "/metadata/resourceVersion", value: meta(d)["resourceVersion"] },
        { op: "replace", path: "/spec/template", value: chosen.template }
      ])
    })
    const lostRace = (e: unknown) => {
      if ((e as { readonly _tag?: unknown })._tag !== "ApiError") return false
      const status = (e as ApiError.ApiError).status
      // kube-apiserver's 422 for a patch that does not apply has a fixed message; which operation
      // failed is in the causes.
      const causes = status.details?.causes ?? []
      return status.code === 409 || (status.code === 422 && causes.some((c) => /test failed/.test(c.message ?? "")))
    }
    yield* Effect.retry(attempt, { while: lostRace, times: 5 })
    t.out(`${Resources.typeName(x.info)}/${x.name} rolled back\n`)
  })

const patchVerb = (verb: string, patch: (info: Resources.ResourceInfo) => Json, done: string) => (s: Session, t: Terminal, args: ReadonlyArray<string>): Effect.Effect<void, unknown> =>
  Effect.gen(function* () {
    const x = yield* target(s, args, `rollout ${verb}`)
    if (verb !== "restart") yield* deploymentOnly(x.info, `rollout ${verb}`)
    yield* s.conn.client.patch(refOf(x.info), x.namespace, x.name, "merge", patch(x.info))
    t.out(`${Resources.typeName(x.info)}/${x.name} ${done}\n`)
  })

const restart = patchVerb("restart", () => ({ spec: { template: { metadata: { annotations: { "kubectl.kubernetes.io/restartedAt": new Date().toISOString() } } } } }), "restarted")
const pause = patchVerb("pause", () => ({ spec: { paused: true } }), "paused")
const resume = patchVerb("resume", () => ({ spec: { paused: null } }), "resumed")

/** Register `scale` and `rollout`. */
export const register = (program: Command, env: Env): void => {
  examples(
    program
      .command("scale")
      .description("Set the number of replicas of a Deployment, ReplicaSet or StatefulSet")
      .argument("<resource...>", "TYPE/NAME or TYPE NAME")
      .option("--replicas <count>", "the new number of replicas")
      .action((args: Array<string>, opts: { replicas?: string }, command: Command) => env.act(command, (s, t) => scale(s, t, args, opts))),
    `
  kfleet scale deployment/hello --replicas=3
  kfleet scale statefulset web --replicas=0`
  )
  const rollout = program.command("rollout").description("Manage the rollout of a Deployment (status, history, undo, restart, pause, resume)")
  examples(
    rollout,
    `
  kfleet rollout status deployment/hello
  kfleet rollout history deployment/hello
  kfleet rollout undo deployment/hello
  kfleet rollout restart deployment/hello`
  )
  examples(
    rollout
      .command("status")
      .description("Follow a rollout until it completes; exit 1 if it stalls or times out")
      .argument("<resource...>")
      .option("-w, --watch", "follow until done (default)", true)
      .option("--no-watch", "print the current status and exit")
      .option("--timeout <duration>", "give up after this long (e.g. 2m); 0 waits forever", "0")
      .action((args: Array<string>, opts: { watch?: boolean; timeout?: string }, command: Command) => env.act(command, (s, t) => status(s, t, args, opts))),
    "  kfleet rollout status deployment/hello --timeout=2m"
  )
  examples(
    rollout
      .command("history")
      .description("List a Deployment's revisions")
      .argument("<resource...>")
      .option("--revision <n>", "show the pod template of one revision")
      .action((args: Array<string>, opts: { revision?: string }, command: Command) => env.act(command, (s, t) => history(s, t, args, opts))),
    "  kfleet rollout history deployment/hello --revision=2"
  )
  examples(
    rollout
      .command("undo")
      .description("Roll a Deployment back to the previous (or a given) revision")
      .argument("<resource...>")
      .option("--to-revision <n>", "the revision to go back to (default: the previous one)")
      .action((args: Array<string>, opts: { toRevision?: string }, command: Command) => env.act(command, (s, t) => undo(s, t, args, opts))),
    "  kfleet rollout undo deployment/hello --to-revision=1"
  )
  for (const [verb, run, what] of [
    ["restart", restart, "Restart a workload's pods by rolling out its template again"],
    ["pause", pause, "Pause a Deployment's rollout (changes to the template wait)"],
    ["resume", resume, "Resume a paused Deployment"]
  ] as const) {
    examples(
      rollout
        .command(verb)
        .description(what)
        .argument("<resource...>")
        .action((args: Array<string>, _: unknown, command: Command) => env.act(command, (s, t) => run(s, t, args))),
      `  kfleet rollout ${verb} deployment/hello`
    )
  }
}
