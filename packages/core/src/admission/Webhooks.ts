/**
 * External admission webhooks: `MutatingWebhookConfiguration` and
 * `ValidatingWebhookConfiguration` objects name HTTPS endpoints (`clientConfig.url` + `caBundle`)
 * and the requests they want (`rules`, `namespaceSelector`, `objectSelector`). For each matching
 * webhook the server POSTs an `admission.k8s.io/v1` AdmissionReview and reads the answer: a
 * denial becomes the request's error (`admission webhook "<name>" denied the request: …`), a
 * mutating webhook's base64 JSON Patch is applied to the object, and a webhook that cannot be
 * reached, times out (`timeoutSeconds`, default 10) or answers nonsense fails the request with 500
 * under `failurePolicy: Fail` (the default) and is skipped under `Ignore`.
 *
 * Core stays free of HTTP clients: the transport is the injected `Call` (the daemon implements it
 * with node:https). The configurations are kept in memory, listed once and then followed through
 * the store's watch. Mutating webhooks run in configuration-name order, each seeing the previous
 * one's patch; validating webhooks run concurrently. Requests on the webhook configurations
 * themselves are never sent to webhooks (a broken webhook could not be removed otherwise).
 * Not supported: `clientConfig.service`, `matchConditions` (CEL), reinvocation.
 *
 *   request ─▶ matching webhooks ─▶ AdmissionReview ─▶ Call ─▶ response ─▶ allow | patch | deny | failurePolicy
 */
import { Duration, Effect, Either, Option, Schema, Stream, type Scope } from "effect"
import type * as Admission from "../api/Admission.js"
import * as ApiError from "../api/ApiError.js"
import * as FlowControl from "../api/FlowControl.js"
import * as Patch from "../api/Patch.js"
import { identity, type Transformer } from "../api/Transformer.js"
import * as LabelSelector from "../model/LabelSelector.js"
import * as Policy from "../model/Policy.js"
import * as Status from "../model/Status.js"
import { asArray, isJsonObject, type JsonObject } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"
import * as Keys from "../store/Keys.js"
import type { KeyValue, StoreService } from "../store/Store.js"
import { WebhookCallError } from "./AdmissionError.js"
import { getObject, labels, parse } from "./internal/json.js"

// Defined in the admission layer's error module; re-exported so `Webhooks.WebhookCallError` stays.
export { WebhookCallError }

/** What a webhook endpoint answered. */
export interface CallResponse {
  readonly status: number
  readonly body: string
}

/**
 * POST `body` (JSON) to `url`, trusting `caBundle` (PEM; the system roots when undefined), giving
 * up after `timeoutMillis`. Implemented by the host (node:https in the daemon).
 */
export type Call = (url: string, caBundle: string | undefined, body: string, timeoutMillis: number) => Effect.Effect<CallResponse, WebhookCallError>

/** Which kind of webhook. */
export type Kind = "Mutating" | "Validating"

/** One webhook, resolved from its configuration. */
export interface Webhook {
  readonly kind: Kind
  readonly configuration: string
  readonly spec: Policy.ValidatingWebhook
}

/** What matching needs to know about the request. */
export interface Attributes {
  readonly operation: Admission.Operation
  readonly group: string
  readonly version: string
  readonly plural: string
  readonly subresource: string
  readonly namespaced: boolean
}

const includesOrStar = (list: ReadonlyArray<string> | undefined, value: string) => (list ?? []).some((x) => x === "*" || x === value)

const resourceMatches = (pattern: string, plural: string, subresource: string) => {
  if (pattern === "*/*") return true
  const slash = pattern.indexOf("/")
  const res = slash < 0 ? pattern : pattern.slice(0, slash)
  const sub = slash < 0 ? "" : pattern.slice(slash + 1)
  if (res !== "*" && res !== plural) return false
  return slash < 0 ? subresource === "" : sub === "*" ? subresource !== "" : sub === subresource
}

/** Whether one rule selects the request (pure). */
export const ruleMatches = (rule: Policy.RuleWithOperations, a: Attributes): boolean => {
  const scope = rule.scope ?? "*"
  const namespacedRequest = a.namespaced && !(a.group === "" && a.plural === "namespaces")
  return (
    includesOrStar(rule.operations, a.operation) &&
    includesOrStar(rule.apiGroups, a.group) &&
    includesOrStar(rule.apiVersions, a.version) &&
    (rule.resources ?? []).some((p) => resourceMatches(p, a.plural, a.subresource)) &&
    (scope === "*" || (scope === "Namespaced") === namespacedRequest)
  )
}

const selects = (selector: LabelSelector.LabelSelector | undefined, set: Record<string, string>) => selector === undefined || LabelSelector.matches(selector, set)

/**
 * Whether a webhook is called for the request (pure): a rule matches, the namespace's labels
 * match `namespaceSelector` (cluster-scoped requests always do; a Namespace is matched by its own
 * labels), and the object's or old object's labels match `objectSelector`.
 */
export const matches = (
  webhook: Policy.ValidatingWebhook,
  a: Attributes,
  objects: { readonly object: unknown; readonly oldObject: unknown; readonly namespaceLabels: Record<string, string> | undefined }
): boolean => {
  if (!(webhook.rules ?? []).some((r) => ruleMatches(r, a))) return false
  const isNamespace = a.group === "" && a.plural === "namespaces"
  const nsLabels = isNamespace ? labels(objects.object ?? objects.oldObject) : objects.namespaceLabels
  if (webhook.namespaceSelector !== undefined && nsLabels !== undefined && !selects(webhook.namespaceSelector, nsLabels)) return false
  if (webhook.objectSelector !== undefined) {
    const hit = [objects.object, objects.oldObject].some((o) => o !== undefined && o !== null && selects(webhook.objectSelector, labels(o)))
    if (!hit) return false
  }
  return true
}

const exempt = (a: Pick<Attributes, "group" | "plural">) =>
  a.group === "admissionregistration.k8s.io" && (a.plural === "mutatingwebhookconfigurations" || a.plural === "validatingwebhookconfigurations")

// A CONNECT's options are its object (PodExecOptions): upstream sends no separate options then.
const optionsKind: Record<Admission.Operation, string | undefined> = { CREATE: "CreateOptions", UPDATE: "UpdateOptions", DELETE: "DeleteOptions", CONNECT: undefined }

/** The AdmissionReview sent for a request (pure). */
export const review = (request: Admission.Request, uid: string): Policy.AdmissionReview => {
  const r = request.resource
  const kind = { group: r.group, version: r.version, kind: r.kind }
  const resource = { group: r.group, version: r.version, resource: r.plural }
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid,
      kind,
      resource,
      ...(request.subresource === "" ? {} : { subResource: request.subresource, requestSubResource: request.subresource }),
      requestKind: kind,
      requestResource: resource,
      name: request.name,
      namespace: request.namespace,
      operation: request.operation,
      userInfo: { username: request.user.name, uid: request.user.uid, groups: [...request.user.groups] },
      object: request.operation === "DELETE" ? null : request.object,
      oldObject: request.operation === "CREATE" ? null : (request.oldObject ?? null),
      dryRun: request.dryRun,
      ...(optionsKind[request.operation] === undefined ? {} : { options: { kind: optionsKind[request.operation], apiVersion: "meta.k8s.io/v1" } })
    }
  }
}

/** What a webhook's answer means. */
export type Verdict =
  | { readonly _tag: "Allowed"; readonly patch: ReadonlyArray<unknown> | undefined; readonly warnings: ReadonlyArray<string> }
  | { readonly _tag: "Denied"; readonly error: ApiError.ApiError }
  /** The answer is unusable: handled by the failure policy. */
  | { readonly _tag: "Failed"; readonly reason: string }

const decodeReview = Schema.decodeUnknownEither(Policy.AdmissionReview)

const base64Text = (b64: string): Either.Either<string, string> =>
  Either.try({
    try: () => {
      const binary = atob(b64)
      const bytes = new Uint8Array(binary.length)
      for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
      return new TextDecoder("utf-8", { fatal: true }).decode(bytes)
    },
    catch: () => "invalid base64"
  })

const isReason = Schema.is(Status.StatusReason)

/** kube's ToStatusErr: a webhook's denial as the request's Status. */
export const denial = (webhook: string, status: Policy.AdmissionResponse["status"]): ApiError.ApiError => {
  const deniedBy = `admission webhook ${JSON.stringify(webhook)} denied the request`
  const code = status?.code !== undefined && status.code >= 400 ? status.code : 400
  const message =
    status?.message !== undefined && status.message !== ""
      ? `${deniedBy}: ${status.message}`
      : status?.reason !== undefined && status.reason !== ""
        ? `${deniedBy}: ${status.reason}`
        : `${deniedBy} without explanation`
  // The Status type knows kube's reasons only; another reason a webhook gives stays in the message.
  const reason = status?.reason !== undefined && isReason(status.reason) ? { reason: status.reason } : {}
  return ApiError.of({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, ...reason, code })
}

/** Read a webhook's HTTP answer (pure). */
export const interpret = (webhook: string, uid: string, mutating: boolean, response: CallResponse): Verdict => {
  if (response.status < 200 || response.status > 299) return { _tag: "Failed", reason: `the server responded with status ${response.status}` }
  const parsed = parse(response.body)
  if (Either.isLeft(parsed)) return { _tag: "Failed", reason: `the response is not JSON: ${parsed.left}` }
  const decoded = decodeReview(parsed.right)
  if (Either.isLeft(decoded)) return { _tag: "Failed", reason: "the response is not an admission.k8s.io/v1 AdmissionReview" }
  const answer = decoded.right.response
  if (answer === undefined) return { _tag: "Failed", reason: "webhook response was absent" }
  if (answer.uid !== uid) return { _tag: "Failed", reason: `expected response.uid=${JSON.stringify(uid)}, got ${JSON.stringify(answer.uid)}` }
  if (!answer.allowed) return { _tag: "Denied", error: denial(webhook, answer.status) }
  const warnings = answer.warnings ?? []
  if (answer.patch === undefined || answer.patch === "" || !mutating) return { _tag: "Allowed", patch: undefined, warnings }
  if (answer.patchType !== "JSONPatch") return { _tag: "Failed", reason: `unsupported patch type ${JSON.stringify(answer.patchType ?? "")}` }
  const text = base64Text(answer.patch)
  if (Either.isLeft(text)) return { _tag: "Failed", reason: `the patch is ${text.left}` }
  const ops = parse(text.right)
  if (Either.isLeft(ops) || !Array.isArray(ops.right)) return { _tag: "Failed", reason: "the patch is not a JSON Patch" }
  return { _tag: "Allowed", patch: ops.right, warnings }
}

/** The webhooks of stored configurations, in configuration-name order (pure). */
export const webhooksOf = (kind: Kind, configurations: ReadonlyArray<JsonObject>): ReadonlyArray<Webhook> => {
  const schema = kind === "Mutating" ? Policy.MutatingWebhook : Policy.ValidatingWebhook
  const decode = Schema.decodeUnknownOption(schema as Schema.Schema<Policy.ValidatingWebhook, unknown>)
  return [...configurations]
    .sort((a, b) => String(metadataOf(a)["name"]).localeCompare(String(metadataOf(b)["name"])))
    .flatMap((c) =>
      asArray(c["webhooks"]).flatMap((w) => {
        const spec = decode(w)
        return Option.isSome(spec) ? [{ kind, configuration: String(metadataOf(c)["name"] ?? ""), spec: spec.value }] : []
      })
    )
}

/** How the plugins are built. */
export interface Options {
  readonly store: StoreService
  readonly call: Call
  readonly transformer?: Transformer
  /** Request uids (tests pin them). */
  readonly uid?: () => string
}

/** The two plugins and what they currently know. */
export interface WebhookPlugins {
  readonly mutating: Admission.Plugin
  readonly validating: Admission.Plugin
  /** The webhooks currently configured. */
  readonly current: (kind: Kind) => ReadonlyArray<Webhook>
}

const group = "admissionregistration.k8s.io"
const plurals: Record<Kind, string> = { Mutating: "mutatingwebhookconfigurations", Validating: "validatingwebhookconfigurations" }

/**
 * Build both plugins: the configurations are listed now and followed through the store's watch
 * for as long as `scope` lives (relisting after a gap in the watch).
 */
export const make = (options: Options): Effect.Effect<WebhookPlugins, never, Scope.Scope> =>
  Effect.gen(function* () {
    const codec = options.transformer ?? identity
    const configs: Record<Kind, Map<string, JsonObject>> = { Mutating: new Map(), Validating: new Map() }
    const cached: Record<Kind, ReadonlyArray<Webhook> | undefined> = { Mutating: undefined, Validating: undefined }
    const decodeKv = (kind: Kind, value: string): JsonObject | undefined => {
      const text = Either.try(() => codec.fromStore({ group, plural: plurals[kind] }, value))
      const parsed = Either.isRight(text) ? parse(text.right) : undefined
      return parsed !== undefined && Either.isRight(parsed) && isJsonObject(parsed.right) ? parsed.right : undefined
    }
    const load = (kind: Kind, items: ReadonlyArray<KeyValue>) => {
      configs[kind].clear()
      for (const kv of items) {
        const o = decodeKv(kind, kv.value)
        if (o !== undefined) configs[kind].set(kv.key, o)
      }
      cached[kind] = undefined
    }
    const list = (kind: Kind) =>
      Effect.map(options.store.list(Keys.prefix(group, plurals[kind])), (page) => {
        load(kind, page.items)
        return page.revision
      })
    const follow = (kind: Kind, from: number): Effect.Effect<never> =>
      Effect.gen(function* () {
        let revision = from
        for (;;) {
          yield* Effect.ignore(
            Stream.runForEach(options.store.watch(Keys.prefix(group, plurals[kind]), revision), (e) =>
              Effect.sync(() => {
                const o = e.type === "DELETED" ? undefined : decodeKv(kind, e.value)
                if (o === undefined) configs[kind].delete(e.key)
                else configs[kind].set(e.key, o)
                cached[kind] = undefined
              })
            )
          )
          // The watch ended (compaction, backend restart): relist, then follow again.
          yield* Effect.sleep(Duration.millis(200))
          const again = yield* Effect.either(list(kind))
          if (Either.isRight(again)) revision = again.right
        }
      })
    for (const kind of ["Mutating", "Validating"] as const) {
      const revision = yield* Effect.orElseSucceed(list(kind), () => 0)
      yield* Effect.forkScoped(follow(kind, revision))
    }
    const current = (kind: Kind) => (cached[kind] ??= webhooksOf(kind, [...configs[kind].values()]))
    const uid = options.uid ?? (() => crypto.randomUUID())

    const attributesOf = (request: Admission.Request): Attributes => ({
      operation: request.operation,
      group: request.resource.group,
      version: request.resource.version,
      plural: request.resource.plural,
      subresource: request.subresource,
      namespaced: request.resource.namespaced
    })

    const matching = (kind: Kind, request: Admission.Request) =>
      Effect.gen(function* () {
        const a = attributesOf(request)
        if (exempt(a)) return []
        const hooks = current(kind).filter((w) => (w.spec.rules ?? []).some((r) => ruleMatches(r, a)))
        if (hooks.length === 0) return []
        const needsNamespace = a.namespaced && request.namespace !== "" && hooks.some((w) => w.spec.namespaceSelector !== undefined)
        const ns = needsNamespace ? yield* getObject(options.store, codec, { group: "", plural: "namespaces", name: request.namespace }) : undefined
        const namespaceLabels = needsNamespace ? labels(ns?.object ?? {}) : undefined
        const object = request.operation === "DELETE" ? undefined : request.object
        return hooks.filter((w) => matches(w.spec, a, { object, oldObject: request.oldObject, namespaceLabels }))
      })

    /** Call one webhook: its verdict, with call failures already resolved by the failure policy. */
    const callOne = (webhook: Webhook, request: Admission.Request): Effect.Effect<Verdict | undefined, ApiError.ApiError> =>
      Effect.gen(function* () {
        const spec = webhook.spec
        if (request.dryRun && spec.sideEffects !== "None" && spec.sideEffects !== "NoneOnDryRun") {
          return yield* Effect.fail(ApiError.badRequest(`admission webhook ${JSON.stringify(spec.name)} does not support dry run`))
        }
        const failed = (reason: string) =>
          spec.failurePolicy === "Ignore"
            ? Effect.succeed(undefined)
            : Effect.fail(ApiError.of(Status.internalError(`failed calling webhook ${JSON.stringify(spec.name)}: ${reason}`)))
        const url = spec.clientConfig.url
        if (url === undefined || url === "") return yield* failed("only clientConfig.url is supported")
        if (!spec.admissionReviewVersions.includes("v1")) return yield* failed("the webhook does not accept admission.k8s.io/v1 AdmissionReview")
        const ca = spec.clientConfig.caBundle === undefined || spec.clientConfig.caBundle === "" ? Either.right(undefined) : base64Text(spec.clientConfig.caBundle)
        if (Either.isLeft(ca)) return yield* failed("clientConfig.caBundle is not valid base64")
        const id = uid()
        const body = JSON.stringify(review(request, id))
        const timeout = (spec.timeoutSeconds ?? 10) * 1000
        // The wait is on another server: the request's API seat is free meanwhile (and the webhook may call this API).
        const answer = yield* FlowControl.awayFromSeat(
          Effect.either(
            options.call(url, ca.right, body, timeout).pipe(
              Effect.timeoutFail({ duration: Duration.millis(timeout), onTimeout: () => new WebhookCallError({ reason: `Post ${JSON.stringify(url)}: context deadline exceeded` }) })
            )
          )
        )
        if (Either.isLeft(answer)) return yield* failed(`failed to call webhook: ${answer.left.reason}`)
        const verdict = interpret(spec.name, id, webhook.kind === "Mutating", answer.right)
        if (verdict._tag === "Failed") return yield* failed(verdict.reason)
        return verdict
      })

    const mutating: Admission.Plugin = {
      name: "MutatingAdmissionWebhook",
      mutate: (request) =>
        Effect.gen(function* () {
          let object = request.object
          for (const webhook of yield* matching("Mutating", request)) {
            const verdict = yield* callOne(webhook, { ...request, object })
            if (verdict === undefined) continue
            if (verdict._tag === "Denied") return yield* Effect.fail(verdict.error)
            if (verdict._tag !== "Allowed" || verdict.patch === undefined) continue
            const patched = Patch.jsonPatch(object, verdict.patch)
            if (Either.isLeft(patched)) {
              return yield* Effect.fail(ApiError.of(Status.internalError(`admission webhook ${JSON.stringify(webhook.spec.name)} returned a patch that does not apply: ${patched.left.detail}`)))
            }
            const decoded = request.resource.decode(patched.right, false)
            if (Either.isLeft(decoded)) {
              return yield* Effect.fail(
                ApiError.of(Status.invalid({ group: request.resource.group, kind: request.resource.kind }, request.name, decoded.left))
              )
            }
            object = decoded.right
          }
          return object
        }),
      // Deletes are only validated: mutating webhooks still get to refuse them.
      validate: (request) =>
        request.operation !== "DELETE"
          ? Effect.succeed([])
          : Effect.gen(function* () {
              for (const webhook of yield* matching("Mutating", request)) {
                const verdict = yield* callOne(webhook, request)
                if (verdict?._tag === "Denied") return yield* Effect.fail(verdict.error)
              }
              return []
            })
    }

    const validating: Admission.Plugin = {
      name: "ValidatingAdmissionWebhook",
      validate: (request) =>
        Effect.gen(function* () {
          const hooks = yield* matching("Validating", request)
          const verdicts = yield* Effect.forEach(hooks, (w) => callOne(w, request), { concurrency: "unbounded" })
          const denied = verdicts.find((v) => v?._tag === "Denied")
          if (denied?._tag === "Denied") return yield* Effect.fail(denied.error)
          return []
        })
    }

    return { mutating, validating, current }
  })
