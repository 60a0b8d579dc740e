/**
 * The `pods/binding` subresource: how a scheduler assigns a pod to a node
 * (`POST /api/v1/namespaces/{ns}/pods/{name}/binding` with a `v1` `Binding`). As in Kubernetes,
 * a pod is bound once: binding a pod that already has `spec.nodeName` is a 409 Conflict, and the
 * write is a compare-and-swap, so two schedulers racing for one pod cannot both win. The binding
 * also records the `PodScheduled=True` condition, as kube-apiserver's binding storage does.
 */
import { Clock, Effect, Either } from "effect"
import * as FieldError from "../model/FieldError.js"
import * as Status from "../model/Status.js"
import { asObject } from "../object/Json.js"
import * as Keys from "../store/Keys.js"
import type { SubresourceHandler } from "./ApiServer.js"
import * as ApiError from "./ApiError.js"
import * as Body from "./Body.js"
import { json } from "./Http.js"
import * as Objects from "./Objects.js"

const fromEither = <A>(e: Either.Either<A, ApiError.ApiError>): Effect.Effect<A, ApiError.ApiError> =>
  Either.isRight(e) ? Effect.succeed(e.right) : Effect.fail(e.left)

const withoutNomination = (status: Record<string, unknown>): Record<string, unknown> => {
  const { nominatedNodeName: _nominated, ...rest } = status
  return rest
}

/** The binding subresource handler. */
export const handler: SubresourceHandler = {
  group: "",
  plural: "pods",
  subresource: "binding",
  handle: (request, route, context) =>
    Effect.gen(function* () {
      if (request.method.toUpperCase() !== "POST") {
        return yield* Effect.fail(ApiError.of(Status.methodNotSupported({ group: "", resource: "pods/binding" }, request.method.toLowerCase())))
      }
      const namespace = route.namespace ?? ""
      const name = route.name ?? ""
      const body = yield* fromEither(Either.flatMap(Body.parse(request.body, request.headers["content-type"]), Body.asObject))
      if ((body["kind"] !== undefined && body["kind"] !== "Binding") || (body["apiVersion"] !== undefined && body["apiVersion"] !== "v1")) {
        return yield* Effect.fail(ApiError.badRequest("the body must be a v1 Binding"))
      }
      const target = asObject(body["target"])
      const node = target["name"]
      if (typeof node !== "string" || node === "") {
        return yield* Effect.fail(ApiError.of(Status.invalid({ group: "", kind: "Binding" }, name, [FieldError.required("target.name")])))
      }
      if (target["kind"] !== undefined && target["kind"] !== "Node" && target["kind"] !== "") {
        return yield* Effect.fail(ApiError.of(Status.invalid({ group: "", kind: "Binding" }, name, [FieldError.notSupported("target.kind", target["kind"], ["Node"])])))
      }
      const key = Keys.object({ group: "", resource: "pods", namespace, name })
      const subject = { group: "", resource: "pods", name }
      const kv = yield* context.store.get(key).pipe(Effect.mapError((e) => ApiError.fromStore(e, subject)))
      const pod = Objects.fromStored({ value: context.transformer.fromStore(context.resource, kv.value), modRevision: kv.modRevision })
      const m = Objects.meta(pod)
      const wantUid = asObject(body["metadata"])["uid"]
      if (typeof wantUid === "string" && wantUid !== "" && wantUid !== m["uid"]) {
        return yield* Effect.fail(ApiError.of(Status.conflict({ group: "", resource: "pods" }, name, `Precondition failed: UID in precondition: ${wantUid}, UID in object meta: ${String(m["uid"])}`)))
      }
      if (m["deletionTimestamp"] !== undefined) {
        return yield* Effect.fail(ApiError.of(Status.conflict({ group: "", resource: "pods" }, name, "pod is being deleted, cannot be assigned to a host")))
      }
      const spec = asObject(pod["spec"])
      if (typeof spec["nodeName"] === "string" && spec["nodeName"] !== "") {
        return yield* Effect.fail(ApiError.of(Status.conflict({ group: "", resource: "pods" }, name, `pod ${name} is already assigned to node "${spec["nodeName"]}"`)))
      }
      const now = Objects.timestamp(yield* Clock.currentTimeMillis)
      const status = asObject(pod["status"])
      const conditions = (Array.isArray(status["conditions"]) ? (status["conditions"] as Array<Record<string, unknown>>) : []).filter((c) => c["type"] !== "PodScheduled")
      const annotations = asObject(asObject(body["metadata"])["annotations"])
      const next = {
        ...pod,
        metadata: Object.keys(annotations).length > 0 ? { ...m, annotations: { ...asObject(m["annotations"]), ...annotations } } : m,
        spec: { ...spec, nodeName: node },
        // A bound pod no longer waits for a nominated node (kube-apiserver clears it too, since 1.34).
        status: { ...withoutNomination(status), conditions: [...conditions, { type: "PodScheduled", status: "True", lastProbeTime: null, lastTransitionTime: now }] }
      }
      const text = yield* fromEither(Objects.toStored(next))
      yield* context.store.update(key, context.transformer.toStore(context.resource, text), kv.modRevision).pipe(Effect.mapError((e) => ApiError.fromStore(e, subject)))
      return json(201, Status.success({ name, group: "", kind: "pods", uid: String(m["uid"] ?? "") }))
    })
}
