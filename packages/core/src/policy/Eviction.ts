/**
 * The `pods/eviction` subresource (`POST /api/v1/namespaces/{ns}/pods/{name}/eviction` with a
 * `policy/v1` Eviction): deletes a pod only if the PodDisruptionBudget guarding it allows one
 * more disruption, as kube-apiserver's eviction storage does. The decision is
 * `policy/Disruption.eviction`; this handler reads the pod and the namespace's budgets, writes
 * the budget's status first (`disruptionsAllowed` − 1 and the pod in `disruptedPods`, a
 * compare-and-swap on the budget, retried on conflict with a fresh read), records the pod's
 * `DisruptionTarget` condition and then deletes it through the ordinary delete (grace period,
 * preconditions and propagation from the Eviction's `deleteOptions`).
 *
 *   429 TooManyRequests  "Cannot evict pod as it would violate the pod's disruption budget." (cause DisruptionBudget)
 *   500                  more than one budget guards the pod
 *   201 Success          the pod is being deleted
 *
 * Terminal, pending and deleting pods are deleted without consulting budgets; running pods that
 * are not Ready follow the budget's `unhealthyPodEvictionPolicy` (AlwaysAllow, or by default only
 * while the budget is satisfied), deleted with their resourceVersion pinned so a pod turning
 * Ready meanwhile is not taken. The writes (budget status, pod condition, pod delete) use the
 * ordinary REST verbs without admission, as upstream's eviction storage deletes through the
 * registry directly (the eviction request itself was authorized as `create` on `pods/eviction`).
 */
import { Clock, Duration, Effect, Either } from "effect"
import * as Conditions from "../object/Conditions.js"
import { asObject } from "../object/Json.js"
import * as Status from "../model/Status.js"
import * as Disruption from "./DisruptionBudget.js"
import * as Keys from "../store/Keys.js"
import type { SubresourceHandler } from "../api/ApiServer.js"
import * as ApiError from "../api/ApiError.js"
import { nodeNameOf } from "../api/authn/NodeCredentials.js"
import * as Body from "../api/Body.js"
import { json, type ApiRequest, type ApiResponse } from "../api/Http.js"
import * as Objects from "../api/Objects.js"
import type { JsonObject, Resource } from "../api/Registry.js"
import * as Rest from "../api/Rest.js"
import type { ResourceRoute } from "../api/Router.js"

const fromEither = <A>(e: Either.Either<A, ApiError.ApiError>): Effect.Effect<A, ApiError.ApiError> =>
  Either.isRight(e) ? Effect.succeed(e.right) : Effect.fail(e.left)

// Upstream's EvictionsRetry: 20 tries on conflict.
const retries = 20

const encoder = new TextEncoder()

const isConflict = (e: ApiError.ApiError) => e.status.reason === "Conflict"

// The condition an evicted pod carries (upstream's PodDisruptionConditions).
const disruptionTarget = { type: "DisruptionTarget", status: "True", reason: "EvictionByEvictionAPI", message: "Eviction API: evicting" } as const

/** A 429 naming the budget, as upstream's createTooManyRequestsError and checkAndDecrement. */
export const tooManyRequests = (cause: string, retryAfterSeconds: number): ApiError.ApiError =>
  ApiError.of(
    {
      ...Status.tooManyRequests(Disruption.tooManyRequestsMessage, retryAfterSeconds),
      details: { causes: [{ reason: Disruption.DisruptionBudgetCause, message: cause }], ...(retryAfterSeconds > 0 ? { retryAfterSeconds } : {}) }
    },
    retryAfterSeconds > 0 ? { "Retry-After": String(retryAfterSeconds) } : undefined
  )

interface Target {
  readonly rest: Rest.Context
  readonly request: ApiRequest
  readonly route: ResourceRoute
  readonly pods: Resource
  readonly budgets: Resource | undefined
}

/** A request to the ordinary REST verbs of `resource`, made from inside this one. */
const inner = (t: Target, resource: Resource, name: string, method: string, body: unknown, subresource?: string, query = new URLSearchParams()) => {
  const { subresource: _eviction, ...route } = t.route
  return {
    ctx: t.rest,
    resource,
    route: { ...route, group: resource.group, version: resource.version, plural: resource.plural, name, ...(subresource === undefined ? {} : { subresource }) } as ResourceRoute,
    request: { ...t.request, method, query, headers: { ...t.request.headers, "content-type": "application/json" }, body: encoder.encode(JSON.stringify(body)) }
  }
}

const readPod = (t: Target, namespace: string, name: string) =>
  Effect.map(
    t.rest.store.get(Keys.object({ group: "", resource: "pods", namespace, name })).pipe(Effect.mapError((e) => ApiError.fromStore(e, { resource: "pods", name }))),
    (kv) => Objects.fromStored({ value: t.rest.transformer.fromStore(t.pods, kv.value), modRevision: kv.modRevision })
  )

const readBudgets = (t: Target, namespace: string) =>
  Effect.gen(function* () {
    const r = t.budgets
    if (r === undefined) return [] as ReadonlyArray<JsonObject>
    const page = yield* t.rest.store.list(Keys.prefix(r.group, r.plural, namespace)).pipe(Effect.mapError((e) => ApiError.fromStore(e, { resource: { group: r.group, resource: r.plural }, name: "" })))
    return page.items.map((kv) => Objects.fromStored({ value: t.rest.transformer.fromStore(r, kv.value), modRevision: kv.modRevision }))
  })

/** Record `DisruptionTarget` on the pod, then delete it with `options` (upstream's addConditionAndDeletePod). */
const deletePod = (t: Target, pod: JsonObject, options: Record<string, unknown>, dryRun: boolean) =>
  Effect.gen(function* () {
    const m = Objects.meta(pod)
    const name = String(m["name"])
    const pre = asObject(options["preconditions"])
    let deleteOptions = options
    if (!dryRun) {
      if (typeof pre["uid"] === "string" && pre["uid"] !== m["uid"]) {
        return yield* Effect.fail(ApiError.of(Status.conflict("pods", name, `Precondition failed: UID in precondition: ${pre["uid"]}, UID in object meta: ${String(m["uid"])}`)))
      }
      if (typeof pre["resourceVersion"] === "string" && pre["resourceVersion"] !== m["resourceVersion"]) {
        return yield* Effect.fail(ApiError.of(Status.conflict("pods", name, `Precondition failed: ResourceVersion in precondition: ${pre["resourceVersion"]}, ResourceVersion in object meta: ${String(m["resourceVersion"])}`)))
      }
      const now = Objects.timestamp(yield* Clock.currentTimeMillis)
      const status = asObject(pod["status"])
      const conditions = Conditions.set(status["conditions"] as ReadonlyArray<Conditions.Condition> | undefined, disruptionTarget, now)
      const marked = { ...pod, status: { ...status, conditions } }
      const answer = yield* Rest.update(inner(t, t.pods, name, "PUT", marked, "status"), name)
      // Our own write moved the resourceVersion: a pinned delete follows it.
      if (typeof pre["resourceVersion"] === "string") {
        const rv = Objects.meta(asObject((answer as { readonly body?: unknown }).body))["resourceVersion"]
        deleteOptions = { ...options, preconditions: { ...pre, resourceVersion: rv } }
      }
    }
    yield* Rest.remove(inner(t, t.pods, name, "DELETE", deleteOptions, undefined, new URLSearchParams(dryRun ? [["dryRun", "All"]] : [])), name)
  })

const pinned = (options: Record<string, unknown>, pod: JsonObject) => ({
  ...options,
  preconditions: { ...asObject(options["preconditions"]), resourceVersion: Objects.meta(pod)["resourceVersion"] }
})

const success = (): ApiResponse => json(201, { ...Status.success(), code: 201 })

/** Evict: the decision loop, retried on conflicts as upstream. */
const evict = (t: Target, namespace: string, name: string, options: Record<string, unknown>, dryRun: boolean) =>
  Effect.gen(function* () {
    const userPinned = typeof asObject(options["preconditions"])["resourceVersion"] === "string"
    for (let attempt = 0; ; attempt++) {
      const pod = yield* readPod(t, namespace, name)
      const budgets = yield* readBudgets(t, namespace)
      const decision = Disruption.eviction(pod, budgets, yield* Clock.currentTimeMillis, dryRun)
      const retry = (e: ApiError.ApiError) => isConflict(e) && attempt < retries
      switch (decision._tag) {
        case "MultipleBudgets":
          return json(500, {
            kind: "Status",
            apiVersion: "v1",
            metadata: {},
            status: "Failure",
            message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            code: 500
          })
        case "TooManyRequests":
          return yield* Effect.fail(tooManyRequests(decision.cause, decision.retryAfterSeconds))
        case "Forbidden":
          return yield* Effect.fail(ApiError.of(Status.forbidden({ group: "policy", resource: "poddisruptionbudget" }, decision.budget, decision.reason)))
        case "Delete": {
          const opts = decision.pinResourceVersion && !userPinned ? pinned(options, pod) : options
          const done = yield* Effect.either(deletePod(t, pod, opts, dryRun))
          if (Either.isRight(done)) return success()
          // A pod that changed under a pin we added is read again; the caller's own pin is final.
          if (retry(done.left) && !userPinned) {
            yield* Effect.sleep(Duration.millis(Math.floor(Math.random() * 20)))
            continue
          }
          return yield* Effect.fail(done.left)
        }
        case "DeleteUnhealthy": {
          const done = yield* Effect.either(deletePod(t, pod, userPinned ? options : pinned(options, pod), dryRun))
          if (Either.isRight(done)) return success()
          // The pod changed (it may have turned Ready): the caller should ask again.
          if (isConflict(done.left) && !userPinned) return yield* Effect.fail(tooManyRequests(`The disruption budget ${decision.budget} is still being processed by the server.`, 10))
          return yield* Effect.fail(done.left)
        }
        case "Decrement": {
          if (!dryRun) {
            const budgetName = String(Objects.meta(decision.budget)["name"])
            const written = yield* Effect.either(Rest.update(inner(t, t.budgets!, budgetName, "PUT", { ...decision.budget, status: decision.status }, "status"), budgetName))
            if (Either.isLeft(written)) {
              if (retry(written.left)) continue
              if (isConflict(written.left)) {
                return yield* Effect.fail(ApiError.of(Status.timeout(`couldn't update PodDisruptionBudget "${budgetName}" due to conflicts`, 10)))
              }
              return yield* Effect.fail(written.left)
            }
          }
          yield* deletePod(t, pod, options, dryRun)
          return success()
        }
      }
    }
  })

const propagateDryRun = (request: ApiRequest, deleteOptions: Record<string, unknown>): Either.Either<boolean, ApiError.ApiError> => {
  const fromQuery = request.query.getAll("dryRun").filter((v) => v !== "")
  const fromBody = Array.isArray(deleteOptions["dryRun"]) ? (deleteOptions["dryRun"] as ReadonlyArray<unknown>).map(String) : []
  if (fromQuery.length > 0 && fromBody.length > 0 && fromQuery.join(",") !== fromBody.join(",")) {
    return Either.left(ApiError.badRequest(`Non-matching dry-run options in request and content: [${fromQuery.join(" ")}] and [${fromBody.join(" ")}]`))
  }
  const all = [...fromQuery, ...fromBody]
  if (all.some((v) => v !== "All")) return Either.left(ApiError.badRequest(`dryRun: Unsupported value: ${JSON.stringify(all.find((v) => v !== "All"))}: supported values: "All"`))
  return Either.right(all.length > 0)
}

/** The `pods/eviction` subresource handler: pass it in the API server's `subresources`. */
export const subresource: SubresourceHandler = {
  group: "",
  plural: "pods",
  subresource: "eviction",
  handle: (request, route, context) =>
    Effect.gen(function* () {
      if (request.method.toUpperCase() !== "POST") {
        return yield* Effect.fail(ApiError.of(Status.methodNotSupported({ group: "", resource: "pods/eviction" }, request.method.toLowerCase())))
      }
      const namespace = route.namespace ?? ""
      const name = route.name ?? ""
      const body = yield* fromEither(Either.flatMap(Body.parse(request.body, request.headers["content-type"]), Body.asObject))
      const apiVersion = body["apiVersion"]
      if ((body["kind"] !== undefined && body["kind"] !== "Eviction") || (apiVersion !== undefined && apiVersion !== "policy/v1" && apiVersion !== "policy/v1beta1")) {
        return yield* Effect.fail(ApiError.badRequest(`not a Eviction object: ${String(apiVersion ?? "")}, Kind=${String(body["kind"] ?? "")}`))
      }
      const evictionName = Objects.meta(body)["name"]
      if (evictionName !== undefined && evictionName !== "" && evictionName !== name) {
        return yield* Effect.fail(ApiError.badRequest("name in URL does not match name in Eviction object"))
      }
      const deleteOptions = asObject(body["deleteOptions"])
      const dryRun = yield* fromEither(propagateDryRun(request, deleteOptions))
      // The ordinary verbs, over the server's store and registry; the pod's delete skips
      // admission as upstream's eviction storage does, and nothing here reads a watch cache.
      const rest: Rest.Context = {
        store: context.store,
        registry: context.registry,
        region: "",
        cache: () => Effect.fail(ApiError.of(Status.internalError("the eviction subresource reads no watch cache"))),
        waitForRevision: Duration.zero,
        random: Math.random,
        admission: [],
        transformer: context.transformer
      }
      const { dryRun: _dryRun, ...options } = deleteOptions
      // NodeRestriction's rule, here because evictions skip admission: a node evicts only its own pods.
      const node = nodeNameOf(request.user)
      if (node !== undefined) {
        const pod = yield* rest.store.get(Keys.object({ group: "", resource: "pods", namespace, name })).pipe(Effect.mapError((e) => ApiError.fromStore(e, { resource: "pods", name })))
        if (asObject(Objects.fromStored(pod)["spec"])["nodeName"] !== node) {
          return yield* Effect.fail(ApiError.of(Status.forbidden({ group: "", resource: "pods/eviction" }, name, `node "${node}" can only evict pods with spec.nodeName set to itself`)))
        }
      }
      const target: Target = { rest, request, route, pods: context.resource, budgets: context.registry.byResource("policy", "v1", "poddisruptionbudgets") }
      return yield* evict(target, namespace, name, options, dryRun)
    })
}
