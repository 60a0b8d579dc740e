/**
 * `POST .../pods/{name}/exec` and `POST .../pods/{name}/signal`: run a command in a container,
 * or send its main process a signal, through the pod's node (`NodeAccess`). Each passes three
 * gates, in this order:
 *
 *   1. RBAC: the dedicated verbs `exec` on `pods/exec` and `signal` on `pods/signal` (Authz
 *      maps these POSTs to them), so "may create pods" never implies "may get a shell";
 *   2. consent: a `ProcessControl` in the pod's namespace that covers the pod and the action
 *      (403 naming the missing consent otherwise);
 *   3. admission: the chain sees a CONNECT of `pods/exec` (object `PodExecOptions`) or
 *      `pods/signal` (object `PodSignalOptions`), so webhooks and policies can refuse it.
 *
 * Every action that reaches the node leaves an audit Event on the pod (reason `Exec` or
 * `Signal`) naming the user, the container and the outcome. The event names the executable and
 * the number of arguments, not the arguments: they often carry secrets.
 *
 * Fleet's exec is one request and one answer (JSON body in, JSON result out) rather than
 * Kubernetes' streaming SPDY/WebSocket upgrade; interactive terminals are out of its scope.
 *
 *   request   {"container": "app", "command": ["sh", "-c", "echo hi"], "stdin": "...", "timeoutSeconds": 10}
 *             (or the query string: ?container=app&command=sh&command=-c&command=echo%20hi)
 *   response  {"apiVersion": "fleet.koder.dev/v1", "kind": "PodExecResult", "exitCode": 0, "stdout": "hi\n", ...}
 */
import { Clock, Effect, Either } from "effect"
import * as FieldError from "../model/FieldError.js"
import * as ProcessControl from "../model/ProcessControl.js"
import * as Status from "../model/Status.js"
import { asObject } from "../object/Json.js"
import * as Metadata from "../object/Metadata.js"
import * as Keys from "../store/Keys.js"
import * as Admission from "./Admission.js"
import type { SubresourceHandler } from "./ApiServer.js"
import * as ApiError from "./ApiError.js"
import * as Body from "./Body.js"
import { json, type ApiRequest, type UserInfo } from "./Http.js"
import type * as NodeAccess from "./NodeAccess.js"
import * as Objects from "./Objects.js"
import * as PodLog from "./PodLog.js"
import type { JsonObject, Registry, Resource } from "./Registry.js"
import type { StoreService } from "../store/Store.js"
import type { Transformer } from "./Transformer.js"

const fromEither = <A>(e: Either.Either<A, ApiError.ApiError>): Effect.Effect<A, ApiError.ApiError> =>
  Either.isRight(e) ? Effect.succeed(e.right) : Effect.fail(e.left)

/** An exec request, from the body or the query string. */
export interface ExecRequest {
  readonly container: string
  readonly command: ReadonlyArray<string>
  readonly stdin?: string | undefined
  readonly timeoutSeconds?: number | undefined
}

/** A signal request. */
export interface SignalRequest {
  readonly container: string
  readonly signal: string
}

const execKind = { group: "", kind: "PodExecOptions" }
const signalKind = { group: "fleet.koder.dev", kind: "PodSignalOptions" }

const bodyOf = (request: ApiRequest): Either.Either<Record<string, unknown>, ApiError.ApiError> =>
  request.body === undefined || request.body.length === 0
    ? Either.right({})
    : Either.flatMap(Body.parse(request.body, request.headers["content-type"]), Body.asObject)

/** An ExecRequest from a request's body or query (pure). */
export const parseExec = (request: ApiRequest): Either.Either<ExecRequest, ApiError.ApiError> =>
  Either.flatMap(bodyOf(request), (body) => {
    const q = request.query
    const rawCommand = body["command"] ?? (q.getAll("command").length > 0 ? q.getAll("command") : undefined)
    const container = String(body["container"] ?? q.get("container") ?? "")
    const errors: Array<FieldError.FieldError> = []
    const command = Array.isArray(rawCommand) ? rawCommand : []
    if (!Array.isArray(rawCommand) || command.length === 0) errors.push(FieldError.required("command", "you must specify at least one command for the container"))
    else if (!command.every((c) => typeof c === "string")) errors.push(FieldError.invalid("command", rawCommand, "must be a list of strings"))
    const stdin = body["stdin"]
    if (stdin !== undefined && typeof stdin !== "string") errors.push(FieldError.invalid("stdin", stdin, "must be a string"))
    const rawTimeout = body["timeoutSeconds"] ?? q.get("timeoutSeconds") ?? undefined
    const timeoutSeconds = rawTimeout === undefined || rawTimeout === "" ? undefined : Number(rawTimeout)
    if (timeoutSeconds !== undefined && !(Number.isInteger(timeoutSeconds) && timeoutSeconds > 0)) errors.push(FieldError.invalid("timeoutSeconds", rawTimeout, "must be a positive integer"))
    if (errors.length > 0) return Either.left(ApiError.of(Status.invalid(execKind, "", errors)))
    return Either.right({
      container,
      command: command as ReadonlyArray<string>,
      ...(typeof stdin === "string" ? { stdin } : {}),
      ...(timeoutSeconds === undefined ? {} : { timeoutSeconds })
    })
  })

/** A SignalRequest from a request's body or query (pure). */
export const parseSignal = (request: ApiRequest): Either.Either<SignalRequest, ApiError.ApiError> =>
  Either.flatMap(bodyOf(request), (body) => {
    const signal = String(body["signal"] ?? request.query.get("signal") ?? "")
    const container = String(body["container"] ?? request.query.get("container") ?? "")
    if (signal === "") return Either.left(ApiError.of(Status.invalid(signalKind, "", [FieldError.required("signal")])))
    if (!(ProcessControl.SignalNames as ReadonlyArray<string>).includes(signal)) {
      return Either.left(ApiError.of(Status.invalid(signalKind, "", [FieldError.notSupported("signal", signal, ProcessControl.SignalNames)])))
    }
    return Either.right({ container, signal })
  })

export interface Context {
  readonly store: StoreService
  readonly registry: Registry
  readonly resource: Resource
  readonly transformer: Transformer
  readonly admission: ReadonlyArray<Admission.Plugin>
}

const forbidden = (sub: string, pod: string, detail: string) => ApiError.of(Status.forbidden({ group: "", resource: `pods/${sub}` }, pod, detail))

/** The pod, its container and its node, once the pod can be reached at all. */
export const target = (context: Context, namespace: string, name: string, wanted: string, sub: string) =>
  Effect.gen(function* () {
    const pod = yield* PodLog.readPod(context, namespace, name)
    const phase = String(asObject(pod["status"])["phase"] ?? "")
    if (phase === "Succeeded" || phase === "Failed") {
      const verb = sub === "exec" ? "exec into" : sub === "attach" ? "attach to" : sub === "portforward" ? "forward ports of" : "signal"
      return yield* Effect.fail(ApiError.badRequest(`cannot ${verb} a container in a completed pod; current phase is ${phase}`))
    }
    const container = yield* fromEither(PodLog.chooseContainer(pod, wanted))
    const node = yield* fromEither(PodLog.nodeOf(pod, container))
    const podIP = asObject(pod["status"])["podIP"]
    return { pod, node, container, uid: String(Objects.meta(pod)["uid"] ?? ""), labels: Metadata.labelsOf(pod), podIP: typeof podIP === "string" ? podIP : undefined }
  })

/** Gate 2: some ProcessControl in the namespace covers the pod and the action. */
export const consent = (context: Context, namespace: string, name: string, labels: Record<string, string>, action: ProcessControl.Action, sub: string) =>
  Effect.gen(function* () {
    const resource = context.registry.byKind("fleet.koder.dev/v1", "ProcessControl")
    const page = yield* context.store
      .list(Keys.prefix("fleet.koder.dev", "processcontrols", namespace))
      .pipe(Effect.mapError(() => ApiError.of(Status.serviceUnavailable("cannot read processcontrols"))))
    const consents = page.items.map((kv) => Objects.fromStored({ value: resource === undefined ? kv.value : context.transformer.fromStore(resource, kv.value), modRevision: kv.modRevision }))
    if (ProcessControl.permits(consents, labels, action)) return
    const what = action._tag === "exec" ? "exec into this pod" : action._tag === "portforward" ? "forward ports of this pod" : `send ${action.signal} to this pod`
    return yield* Effect.fail(forbidden(sub, name, `no ProcessControl in namespace ${JSON.stringify(namespace)} consents to ${what} (create one to allow it)`))
  })

/** Gate 3: the admission chain sees a CONNECT. */
export const admit = (context: Context, user: UserInfo, namespace: string, name: string, sub: string, object: JsonObject) =>
  Admission.validate(context.admission, {
    operation: "CONNECT",
    user,
    resource: context.resource,
    subresource: sub,
    namespace,
    name,
    object,
    oldObject: undefined,
    dryRun: false
  })

/** The audit Event; written without admission (it is the server's own record). A failure to write it is not the user's. */
export const recordEvent = (context: Context, namespace: string, pod: string, uid: string, reason: string, message: string, type = "Normal") =>
  Effect.gen(function* () {
    const resource = context.registry.byKind("v1", "Event")
    if (resource === undefined) return
    const now = yield* Clock.currentTimeMillis
    const stamp = Objects.timestamp(now)
    const name = `${pod}.${now.toString(16)}${Math.floor(Math.random() * 0xffff).toString(16)}`
    const event: JsonObject = {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name, namespace },
      involvedObject: { apiVersion: "v1", kind: "Pod", namespace, name: pod, uid },
      reason,
      message,
      type,
      count: 1,
      firstTimestamp: stamp,
      lastTimestamp: stamp,
      source: { component: "fleet-apiserver" },
      reportingComponent: "fleet-apiserver",
      reportingInstance: ""
    }
    const prepared = Objects.prepareCreate(resource, event, { namespace, now, uid: crypto.randomUUID(), region: "", random: Math.random })
    if (Either.isLeft(prepared)) return
    const text = Objects.toStored(prepared.right)
    if (Either.isLeft(text)) return
    yield* context.store.create(Keys.object({ group: "", resource: "events", namespace, name }), context.transformer.toStore(resource, text.right))
  }).pipe(Effect.ignore)

export const methodNotAllowed = (request: ApiRequest, sub: string) => ApiError.of(Status.methodNotSupported({ group: "", resource: `pods/${sub}` }, request.method.toLowerCase()))

/** `pods/exec`, reaching nodes through `access()` (late-bound). */
export const execHandler = (access: () => NodeAccess.NodeAccess): SubresourceHandler => ({
  group: "",
  plural: "pods",
  subresource: "exec",
  handle: (request, route, context) =>
    Effect.gen(function* () {
      if (request.method.toUpperCase() !== "POST") return yield* Effect.fail(methodNotAllowed(request, "exec"))
      const asked = yield* fromEither(parseExec(request))
      const namespace = route.namespace ?? ""
      const name = route.name ?? ""
      const t = yield* target(context, namespace, name, asked.container, "exec")
      yield* consent(context, namespace, name, t.labels, { _tag: "exec" }, "exec")
      yield* admit(context, request.user, namespace, name, "exec", {
        apiVersion: "v1",
        kind: "PodExecOptions",
        container: t.container,
        command: [...asked.command],
        stdin: asked.stdin !== undefined,
        stdout: true,
        stderr: true,
        tty: false
      })
      const result = yield* access()
        .exec({ node: t.node, namespace, pod: name, uid: t.uid, container: t.container }, asked)
        .pipe(
          Effect.tapError((e) =>
            recordEvent(context, namespace, name, t.uid, "Exec", `${request.user.name} could not run ${JSON.stringify(asked.command[0])} in container ${JSON.stringify(t.container)}: ${e.status.message}`, "Warning")
          )
        )
      const outcome = result.timedOut ? "timed out" : `exit code ${result.exitCode}`
      yield* recordEvent(
        context,
        namespace,
        name,
        t.uid,
        "Exec",
        `${request.user.name} ran ${JSON.stringify(asked.command[0])} with ${asked.command.length - 1} argument(s) in container ${JSON.stringify(t.container)}: ${outcome}`
      )
      return json(200, {
        apiVersion: "fleet.koder.dev/v1",
        kind: "PodExecResult",
        metadata: { name, namespace },
        container: t.container,
        exitCode: result.exitCode,
        stdout: result.stdout,
        stderr: result.stderr,
        timedOut: result.timedOut
      })
    })
})

/** `pods/signal`, reaching nodes through `access()` (late-bound). */
export const signalHandler = (access: () => NodeAccess.NodeAccess): SubresourceHandler => ({
  group: "",
  plural: "pods",
  subresource: "signal",
  handle: (request, route, context) =>
    Effect.gen(function* () {
      if (request.method.toUpperCase() !== "POST") return yield* Effect.fail(methodNotAllowed(request, "signal"))
      const asked = yield* fromEither(parseSignal(request))
      const namespace = route.namespace ?? ""
      const name = route.name ?? ""
      const t = yield* target(context, namespace, name, asked.container, "signal")
      yield* consent(context, namespace, name, t.labels, { _tag: "signal", signal: asked.signal }, "signal")
      yield* admit(context, request.user, namespace, name, "signal", { apiVersion: "fleet.koder.dev/v1", kind: "PodSignalOptions", container: t.container, signal: asked.signal })
      yield* access()
        .signal({ node: t.node, namespace, pod: name, uid: t.uid, container: t.container }, asked.signal)
        .pipe(
          Effect.tapError((e) =>
            recordEvent(context, namespace, name, t.uid, "Signal", `${request.user.name} could not send ${asked.signal} to container ${JSON.stringify(t.container)}: ${e.status.message}`, "Warning")
          )
        )
      yield* recordEvent(context, namespace, name, t.uid, "Signal", `${request.user.name} sent ${asked.signal} to container ${JSON.stringify(t.container)}`)
      return json(200, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", message: `sent ${asked.signal} to container ${t.container} of pod ${name}`, code: 200 })
    })
})
