/**
 * `GET /api/v1/namespaces/{ns}/pods/{name}/log`: a container's output, streamed as text from
 * the pod's node (through `NodeAccess`), with Kubernetes' PodLogOptions: `container`, `follow`,
 * `previous`, `timestamps`, `tailLines`, `sinceSeconds`, `limitBytes`. Authorized as `get` on
 * `pods/log`, as in Kubernetes. The messages are kube-apiserver's:
 *
 *   400 a container name must be specified for pod web, choose one of: [app sidecar]
 *   400 container "x" in pod "web" is waiting to start: ContainerCreating
 *   400 previous terminated container "app" in pod "web" not found
 */
import { Effect, Either } from "effect"
import * as FieldError from "../model/FieldError.js"
import * as Status from "../model/Status.js"
import * as Keys from "../store/Keys.js"
import type { SubresourceHandler } from "./ApiServer.js"
import * as ApiError from "./ApiError.js"
import type { ApiRequest } from "./Http.js"
import type * as NodeAccess from "./NodeAccess.js"
import * as Objects from "./Objects.js"
import type { JsonObject, Resource } from "./Registry.js"
import type { StoreService } from "../store/Store.js"
import type { Transformer } from "./Transformer.js"
import { asArray, asObject } from "../object/Json.js"


const podLogOptions = { group: "", kind: "PodLogOptions" }

/** A non-negative integer query parameter, or a 422 naming it. */
const count = (query: URLSearchParams, name: string, min: number): Either.Either<number | undefined, ApiError.ApiError> => {
  const raw = query.get(name)
  if (raw === null || raw === "") return Either.right(undefined)
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min) {
    return Either.left(ApiError.of(Status.invalid(podLogOptions, "", [FieldError.invalid(name, raw, `must be an integer greater than or equal to ${min}`)])))
  }
  return Either.right(n)
}

const flag = (query: URLSearchParams, name: string): boolean => {
  const v = query.get(name)
  return v === "true" || v === "1"
}

/** PodLogOptions from the query string (pure). */
export const parseOptions = (query: URLSearchParams): Either.Either<NodeAccess.LogOptions & { readonly container: string }, ApiError.ApiError> =>
  Either.gen(function* () {
    const tailLines = yield* count(query, "tailLines", 0)
    const sinceSeconds = yield* count(query, "sinceSeconds", 1)
    const limitBytes = yield* count(query, "limitBytes", 1)
    return {
      container: query.get("container") ?? "",
      follow: flag(query, "follow"),
      previous: flag(query, "previous"),
      timestamps: flag(query, "timestamps"),
      tailLines,
      sinceSeconds,
      limitBytes
    }
  })

const names = (spec: Record<string, unknown>, field: string): Array<string> => asArray(spec[field]).map((c) => String(asObject(c)["name"] ?? ""))

/** The container a request means, or kube-apiserver's 400 (pure). */
export const chooseContainer = (pod: JsonObject, requested: string): Either.Either<string, ApiError.ApiError> => {
  const name = String(Objects.meta(pod)["name"] ?? "")
  const spec = asObject(pod["spec"])
  const containers = names(spec, "containers")
  const inits = names(spec, "initContainers")
  const ephemeral = names(spec, "ephemeralContainers")
  if (requested === "") {
    if (containers.length === 1) return Either.right(containers[0]!)
    let message = `a container name must be specified for pod ${name}, choose one of: [${containers.join(" ")}]`
    if (inits.length > 0) message += ` or one of the init containers: [${inits.join(" ")}]`
    return Either.left(ApiError.badRequest(message))
  }
  if ([...containers, ...inits, ...ephemeral].includes(requested)) return Either.right(requested)
  return Either.left(ApiError.badRequest(`container ${requested} is not valid for pod ${name}`))
}

/** Read a pod (404 as the API answers it). */
export const readPod = (
  context: { readonly store: StoreService; readonly resource: Resource; readonly transformer: Transformer },
  namespace: string,
  name: string
): Effect.Effect<JsonObject, ApiError.ApiError> =>
  context.store.get(Keys.object({ group: "", resource: "pods", namespace, name })).pipe(
    Effect.mapError((e) => ApiError.fromStore(e, { resource: { group: "", resource: "pods" }, name })),
    Effect.map((kv) => Objects.fromStored({ value: context.transformer.fromStore(context.resource, kv.value), modRevision: kv.modRevision }))
  )

/** The node a pod runs on, or the 400 a pod not yet placed gets. */
export const nodeOf = (pod: JsonObject, container: string): Either.Either<string, ApiError.ApiError> => {
  const node = String(asObject(pod["spec"])["nodeName"] ?? "")
  if (node !== "") return Either.right(node)
  const name = String(Objects.meta(pod)["name"] ?? "")
  return Either.left(ApiError.badRequest(`container ${JSON.stringify(container)} in pod ${JSON.stringify(name)} is waiting to start: ContainerCreating`))
}

const methodNotAllowed = (request: ApiRequest) => ApiError.of(Status.methodNotSupported({ group: "", resource: "pods/log" }, request.method.toLowerCase()))

/** The `pods/log` subresource, reaching nodes through `access()` (late-bound: agents come after the API). */
export const handler = (access: () => NodeAccess.NodeAccess): SubresourceHandler => ({
  group: "",
  plural: "pods",
  subresource: "log",
  handle: (request, route, context) =>
    Effect.gen(function* () {
      if (request.method.toUpperCase() !== "GET") return yield* Effect.fail(methodNotAllowed(request))
      const options = yield* parseOptions(request.query)
      const namespace = route.namespace ?? ""
      const pod = yield* readPod(context, namespace, route.name ?? "")
      const container = yield* chooseContainer(pod, options.container)
      const node = yield* nodeOf(pod, container)
      const uid = String(Objects.meta(pod)["uid"] ?? "")
      const body = yield* access().logs({ node, namespace, pod: route.name ?? "", uid, container }, options)
      return { _tag: "Stream" as const, status: 200, headers: { "content-type": "text/plain; charset=utf-8" }, body }
    })
})
