/**
 * DefaultTolerationSeconds admission, as kube-apiserver's plugin of that name: a pod created or
 * updated without a toleration for `node.kubernetes.io/not-ready:NoExecute` (or for
 * `node.kubernetes.io/unreachable:NoExecute`) gets one with `operator: Exists` and
 * `tolerationSeconds` 300 (configurable), so that when its node stops being Ready the node
 * lifecycle controller evicts it after five minutes rather than at once. A toleration with an
 * empty key or an empty effect already covers the taint and is left alone. Subresources
 * (`pods/status`, `pods/binding`, …) are not touched.
 */
import { Effect } from "effect"
import type * as Admission from "../api/Admission.js"
import { asArray, asObject, type JsonObject } from "../object/Json.js"

/** The plugin's name. */
export const name = "DefaultTolerationSeconds"

/** The taint of a node whose Ready condition is False. */
export const notReadyTaint = "node.kubernetes.io/not-ready"

/** The taint of a node whose Ready condition is Unknown. */
export const unreachableTaint = "node.kubernetes.io/unreachable"

/** How long pods tolerate each taint by default (upstream flags of the same names). */
export interface Options {
  /** Seconds a pod stays on a not-ready node (default 300). */
  readonly defaultNotReadyTolerationSeconds?: number
  /** Seconds a pod stays on an unreachable node (default 300). */
  readonly defaultUnreachableTolerationSeconds?: number
}

// A toleration covers the taint when its key is the taint's or empty, and its effect NoExecute or empty.
const covers = (toleration: unknown, key: string): boolean => {
  const t = asObject(toleration)
  const k = t["key"] ?? ""
  const effect = t["effect"] ?? ""
  return (k === key || k === "") && (effect === "NoExecute" || effect === "")
}

/** The pod with the default tolerations added where it has none (pure; the same object when nothing changes). */
export const decide = (pod: JsonObject, options: Options = {}): JsonObject => {
  const spec = asObject(pod["spec"])
  const tolerations = asArray(spec["tolerations"])
  const added: Array<Record<string, unknown>> = []
  if (!tolerations.some((t) => covers(t, notReadyTaint))) {
    added.push({ key: notReadyTaint, operator: "Exists", effect: "NoExecute", tolerationSeconds: options.defaultNotReadyTolerationSeconds ?? 300 })
  }
  if (!tolerations.some((t) => covers(t, unreachableTaint))) {
    added.push({ key: unreachableTaint, operator: "Exists", effect: "NoExecute", tolerationSeconds: options.defaultUnreachableTolerationSeconds ?? 300 })
  }
  if (added.length === 0) return pod
  return { ...pod, spec: { ...spec, tolerations: [...tolerations, ...added] } }
}

/** The plugin. */
export const make = (options: Options = {}): Admission.Plugin => ({
  name,
  mutate: (request) => {
    const r = request.resource
    if (request.operation === "DELETE" || r.group !== "" || r.plural !== "pods" || request.subresource !== "") return Effect.succeed(request.object)
    return Effect.succeed(decide(request.object, options))
  }
})
