/**
 * `GET /api/v1/namespaces/{ns}/pods/{name}/placement`: why the scheduler put a pod where it did,
 * or why it could not — beyond Kubernetes, which only keeps the FailedScheduling Event. The answer
 * is a `fleet.koder.dev/v1` `Placement` with, for the last attempt, every evaluated node's filter
 * verdict (the plugin that rejected it and its reasons) and every scored node's per-plugin scores
 * and weights. Decisions live in the scheduler's memory: a server that is not the scheduling
 * leader, or a pod not attempted since the scheduler started, answers 404 saying so.
 */
import { Effect } from "effect"
import * as Status from "../model/Status.js"
import type * as Schedule from "./Schedule.js"
import * as Keys from "../store/Keys.js"
import type { SubresourceHandler } from "../api/ApiServer.js"
import * as ApiError from "../api/ApiError.js"
import { json } from "../api/Http.js"
import * as Objects from "../api/Objects.js"
import * as Views from "../object/Views.js"

/** Where the handler finds decisions: the running scheduler's `explain`, when there is one. */
export type Explain = (uid: string) => Schedule.Explanation | undefined

/** The placement subresource, reading decisions through `explain()` (late-bound: the scheduler starts after the API). */
export const handler = (explain: () => Explain | undefined): SubresourceHandler => ({
  group: "",
  plural: "pods",
  subresource: "placement",
  handle: (request, route, context) =>
    Effect.gen(function* () {
      if (request.method.toUpperCase() !== "GET") {
        return yield* Effect.fail(ApiError.of(Status.methodNotSupported({ group: "", resource: "pods/placement" }, request.method.toLowerCase())))
      }
      const namespace = route.namespace ?? ""
      const name = route.name ?? ""
      const subject = { resource: { group: "", resource: "pods" }, name }
      const kv = yield* context.store.get(Keys.object({ group: "", resource: "pods", namespace, name })).pipe(Effect.mapError((e) => ApiError.fromStore(e, subject)))
      const pod = Objects.fromStored({ value: context.transformer.fromStore(context.resource, kv.value), modRevision: kv.modRevision })
      const uid = String(Objects.meta(pod)["uid"] ?? "")
      const explanation = explain()?.(uid)
      if (explanation === undefined) {
        return yield* Effect.fail(
          ApiError.of({
            ...Status.notFound({ group: "fleet.koder.dev", resource: "placements" }, name),
            message: `no placement decision is recorded for pod ${JSON.stringify(name)} on this server (it is not the scheduling leader, or the pod has not been attempted since the scheduler started)`
          })
        )
      }
      return json(200, {
        apiVersion: "fleet.koder.dev/v1",
        kind: "Placement",
        metadata: { name, namespace, uid },
        nodeName: Views.pod(pod).spec?.nodeName,
        ...explanation
      })
    })
})
