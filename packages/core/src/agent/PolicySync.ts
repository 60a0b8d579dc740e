/**
 * What each pod on this node must enforce of the cluster's NetworkPolicies, and what to do about
 * it (pure; `PolicyEnforcement` is the Effect around it). The agent resolves every local pod's
 * rules (`NetworkPolicy.resolve`) from the policies, pods and namespaces it watches, and sends a
 * pod's rules to the runtime only when they differ from what it last applied there, so an
 * unrelated change anywhere in the cluster costs a comparison, not a runtime call.
 *
 *   policies, pods, namespaces ─▶ Cluster ─▶ desired(pod) ─┐
 *   applied (rules key per pod uid) ────────────────────────┴▶ decide ─▶ Apply(uid, rules) …, forget(uid) …
 *
 * A pod no policy selects needs no call at all, unless something was applied to it before (the
 * policy that selected it went away: its table must go too). When enforcement fails, `onFailure`
 * says whether the pod may run: with `--network-policy-strict` a selected pod fails closed.
 */
import type * as Pod from "../model/Pod.js"
import * as NetworkPolicy from "../policy/NetworkPolicyRules.js"
import type * as Runtime from "../runtime/Runtime.js"

/** A pod's rules and whether any policy selects it. */
export interface Desired {
  readonly rules: Runtime.NetworkPolicyRules
  /** Some policy isolates the pod in at least one direction. */
  readonly selected: boolean
  /** A stable text of `rules`, to compare with what was applied. */
  readonly key: string
}

/** The rules `pod` must enforce now. */
export const desired = (cluster: NetworkPolicy.Cluster, pod: Pod.Pod): Desired => {
  const rules = NetworkPolicy.resolve(cluster, NetworkPolicy.podView(pod))
  return { rules, selected: rules.ingress.isolated || rules.egress.isolated, key: JSON.stringify(rules) }
}

/** A pod of this node the runtime runs. */
export interface LocalPod {
  readonly uid: string
  readonly pod: Pod.Pod
}

/** What the sync does. */
export interface Decision {
  /** Send these rules for these pods (in the order of `local`). */
  readonly apply: ReadonlyArray<{ readonly uid: string; readonly pod: Pod.Pod; readonly desired: Desired }>
  /** Pods no longer on the node: drop what is remembered of them. */
  readonly forget: ReadonlyArray<string>
}

/**
 * Compare each local pod's desired rules with what was applied (`applied`: uid → key). A pod
 * without an entry has no rules in the runtime: it needs a call only if it is selected.
 */
export const decide = (cluster: NetworkPolicy.Cluster, local: ReadonlyArray<LocalPod>, applied: ReadonlyMap<string, string>): Decision => {
  const apply: Array<Decision["apply"][number]> = []
  const present = new Set<string>()
  for (const { uid, pod } of local) {
    present.add(uid)
    const d = desired(cluster, pod)
    const before = applied.get(uid)
    if (before === undefined ? d.selected : before !== d.key) apply.push({ uid, pod, desired: d })
  }
  return { apply, forget: [...applied.keys()].filter((uid) => !present.has(uid)) }
}

/** What a failed enforcement means for the pod. */
export type Verdict =
  /** Run without the policy, and say so (a Warning Event). */
  | "warn"
  /** Do not run it: `--network-policy-strict` and a policy selects the pod. */
  | "block"

/** The verdict of a failure to enforce `desired` (a pod nothing selects never fails a start). */
export const onFailure = (desired: Desired, strict: boolean): Verdict => (strict && desired.selected ? "block" : "warn")

/** The reason on the waiting container and the Event of a pod whose policy is not enforced. */
export const NotEnforcedReason = "NetworkPolicyNotEnforced"

/** The human message for a pod whose policy could not be enforced. */
export const notEnforcedMessage = (pod: Pod.Pod, cause: string, verdict: Verdict): string =>
  `NetworkPolicy selecting pod ${pod.metadata.namespace ?? ""}/${pod.metadata.name ?? ""} is not enforced: ${cause}` +
  (verdict === "block" ? " (not started: the node runs with --network-policy-strict)" : " (the pod runs unprotected)")
