/**
 * Draining a node, as `kubectl drain` does it, over the typed client: cordon the node
 * (`spec.unschedulable: true`), then evict every pod on it through the `pods/eviction`
 * subresource — except mirror pods (the node's static pods) and DaemonSet pods (their controller
 * would put them straight back) — all at once, each retrying a 429 (a disruption budget says
 * "not now") after `retryDelayMs` until the deadline, and finally wait until every evicted pod is
 * gone (deleted, or replaced by a pod of the same name with another uid).
 *
 *   cordon ─▶ list pods on node ─▶ select ─▶ evict each (429 → wait, retry) ─▶ wait for deletion
 *
 * Departures from kubectl: pods without a controller and pods with emptyDir volumes are evicted
 * without needing `--force` / `--delete-emptydir-data` (the brief of this client); the deadline
 * covers the whole drain, as kubectl's `--timeout`.
 */
import { Clock, Duration, Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import { DrainTimeout } from "./ClientError.js"
import type * as Client from "./Client.js"
import { type JsonObject, asObject } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"



/** The annotation marking a mirror pod. */
export const mirrorAnnotation = "kubernetes.io/config.mirror"


// Defined in the client layer's error module; re-exported so `Drain.DrainTimeout` stays.
export { DrainTimeout }

/** How to drain. */
export interface Options {
  /** Give up after this long (default: never, as kubectl's `--timeout=0`). */
  readonly timeoutMs?: number
  /** Wait this long before retrying an eviction refused with 429 (default 5 000 ms, as kubectl). */
  readonly retryDelayMs?: number
  /** Poll for deleted pods this often (default 1 000 ms, as kubectl). */
  readonly pollMs?: number
  /** Grace period for the evicted pods (default: each pod's own). */
  readonly gracePeriodSeconds?: number
  /** Called for each refusal and each eviction (kubectl's progress lines). */
  readonly onProgress?: (line: string) => void
}

/** A pod the drain left alone, and why. */
export interface Skipped {
  readonly namespace: string
  readonly name: string
  readonly reason: "DaemonSet" | "Mirror"
}

/** Which of a node's pods to evict (pure; kubectl's daemonSet and mirror filters). */
export const select = (pods: ReadonlyArray<JsonObject>): { readonly evict: ReadonlyArray<JsonObject>; readonly skipped: ReadonlyArray<Skipped> } => {
  const evict: Array<JsonObject> = []
  const skipped: Array<Skipped> = []
  for (const pod of pods) {
    const m = metadataOf(pod)
    const id = { namespace: String(m["namespace"] ?? ""), name: String(m["name"] ?? "") }
    const owner = (Array.isArray(m["ownerReferences"]) ? (m["ownerReferences"] as ReadonlyArray<unknown>) : []).map(asObject).find((r) => r["controller"] === true)
    if (asObject(m["annotations"])[mirrorAnnotation] !== undefined) skipped.push({ ...id, reason: "Mirror" })
    else if (owner?.["kind"] === "DaemonSet") skipped.push({ ...id, reason: "DaemonSet" })
    else evict.push(pod)
  }
  return { evict, skipped }
}

/** What a drain did. */
export interface Result {
  /** `namespace/name` of every evicted pod. */
  readonly evicted: ReadonlyArray<string>
  readonly skipped: ReadonlyArray<Skipped>
}

/** Mark a node unschedulable (or schedulable again). */
export const cordon = (client: Client.Client, node: string, unschedulable = true) =>
  client.patch(ResourceRefs.Node, undefined, node, "merge", { spec: { unschedulable: unschedulable ? true : null } })

/** Make a node schedulable again. */
export const uncordon = (client: Client.Client, node: string) => cordon(client, node, false)

/** POST an Eviction for one pod. */
export const evict = (client: Client.Client, namespace: string, name: string, deleteOptions?: JsonObject) =>
  client.createSubresource(ResourceRefs.Pod, namespace, name, "eviction", {
    apiVersion: "policy/v1",
    kind: "Eviction",
    metadata: { name, namespace },
    ...(deleteOptions === undefined ? {} : { deleteOptions })
  })

const keyOf = (pod: JsonObject) => `${String(metadataOf(pod)["namespace"] ?? "")}/${String(metadataOf(pod)["name"] ?? "")}`

/** Cordon `node`, evict its pods (retrying budget refusals), and wait until they are gone. */
export const drain = (client: Client.Client, node: string, options: Options = {}): Effect.Effect<Result, ApiError.ApiError | DrainTimeout> =>
  Effect.gen(function* () {
    const started = yield* Clock.currentTimeMillis
    const deadline = options.timeoutMs === undefined ? undefined : started + options.timeoutMs
    const retryDelay = Duration.millis(options.retryDelayMs ?? 5_000)
    const poll = Duration.millis(options.pollMs ?? 1_000)
    const say = options.onProgress ?? (() => undefined)
    const overdue = (remaining: ReadonlyArray<string>) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        deadline !== undefined && now >= deadline
          ? Effect.fail(new DrainTimeout({ message: `drain did not complete within ${options.timeoutMs} ms`, remaining }))
          : Effect.void
      )

    yield* cordon(client, node)
    const listed = yield* client.listAll(ResourceRefs.Pod, { fieldSelector: `spec.nodeName=${node}` })
    const { evict: pods, skipped } = select(listed.items)
    const deleteOptions = options.gracePeriodSeconds === undefined ? undefined : { gracePeriodSeconds: options.gracePeriodSeconds }

    // One eviction per pod, all at once (kubectl's evictPods); a 429 waits and tries again.
    const evictOne = (pod: JsonObject) =>
      Effect.gen(function* () {
        const m = metadataOf(pod)
        const namespace = String(m["namespace"] ?? "")
        const name = String(m["name"] ?? "")
        for (;;) {
          const answer = yield* Effect.either(evict(client, namespace, name, deleteOptions))
          if (answer._tag === "Right") {
            say(`pod/${name} evicted`)
            return
          }
          const code = answer.left.status.code
          if (code === 404) return
          if (code !== 429) return yield* Effect.fail(answer.left)
          say(`error when evicting pods/"${name}" -n "${namespace}" (will retry after ${Duration.toMillis(retryDelay)}ms): ${answer.left.message}`)
          yield* overdue([keyOf(pod)])
          yield* Effect.sleep(retryDelay)
        }
      })
    yield* Effect.forEach(pods, evictOne, { concurrency: "unbounded", discard: true })

    // Wait until each evicted pod is gone or is another pod by now (kubectl's waitForDelete).
    let waiting = pods
    while (waiting.length > 0) {
      const still: Array<JsonObject> = []
      for (const pod of waiting) {
        const m = metadataOf(pod)
        const current = yield* Effect.either(client.get(ResourceRefs.Pod, String(m["namespace"] ?? ""), String(m["name"] ?? "")))
        if (current._tag === "Left") {
          if (current.left.status.code === 404) continue
          return yield* Effect.fail(current.left)
        }
        if (metadataOf(current.right)["uid"] === m["uid"]) still.push(pod)
      }
      waiting = still
      if (waiting.length === 0) break
      yield* overdue(waiting.map(keyOf))
      yield* Effect.sleep(poll)
    }
    return { evicted: pods.map(keyOf), skipped }
  })
