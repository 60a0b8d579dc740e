/**
 * The ingress's route table, kept from informers of Ingresses, IngressClasses, Services,
 * EndpointSlices and the admin's host policy ConfigMap: marked stale when one of them changes,
 * rebuilt lazily by the first request after a change, and at most every `rebuildMs` (a burst of
 * EndpointSlice writes during a rollout costs one build, not one per write).
 */
import { type Client, Informer, IngressHosts, IngressRoutes } from "@koder/fleet-core"
import { Effect, type Scope } from "effect"
import * as IngressStatus from "./IngressStatus.js"

const ServiceRef: Client.ResourceRef = { apiVersion: "v1", kind: "Service" }
const EndpointSliceRef: Client.ResourceRef = { apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice" }
const ConfigMapRef: Client.ResourceRef = { apiVersion: "v1", kind: "ConfigMap" }
/** What the table is built from, besides the policy. */
const refs = [IngressStatus.IngressRef, IngressStatus.IngressClassRef, ServiceRef, EndpointSliceRef]
/** The oldest a route table may be once something it is built from changed. */
const rebuildMs = 100

/** The table's sources and its last build. */
interface State {
  readonly informers: Informer.Informers
  /** The informer of the one policy ConfigMap. */
  readonly policySource: Informer.Informer
  readonly log: (line: string) => void
  /** The policy ConfigMap's data as last parsed (JSON), and what it gave. */
  policyText: string
  policy: IngressHosts.Policy
  /** A source changed since the last build. */
  dirty: boolean
  current: IngressRoutes.RouteTable | undefined
  builtAt: number
}

/** The route table and the host policy it was built with. */
export interface IngressTable {
  /** The current route table (rebuilt here when stale). */
  readonly table: () => IngressRoutes.RouteTable
  /** The admin's host → namespace policy (parsed again when its ConfigMap changed). */
  readonly hostPolicy: () => IngressHosts.Policy
  /** Waits until every source has been listed once. */
  readonly synced: Effect.Effect<void>
}

/** The policy, re-parsed (its problems logged) only when the ConfigMap's data changed. */
const hostPolicy = (state: State): IngressHosts.Policy => {
  const { namespace, name } = IngressHosts.PolicyConfigMap
  const data = (state.policySource.get(namespace, name)?.["data"] ?? {}) as Record<string, unknown>
  const text = JSON.stringify(data)
  if (text !== state.policyText) {
    state.policyText = text
    const parsed = IngressHosts.parsePolicy(data)
    for (const problem of parsed.problems) state.log(`ConfigMap ${namespace}/${name}: ${problem} (ignored)`)
    state.policy = parsed.policy
  }
  return state.policy
}

/** The table, rebuilt first when a source changed and the last build is `rebuildMs` old. */
const table = (state: State): IngressRoutes.RouteTable => {
  const now = Date.now()
  if (state.current === undefined || (state.dirty && now - state.builtAt >= rebuildMs)) {
    state.dirty = false
    state.builtAt = now
    const { informers } = state
    state.current = IngressRoutes.build({
      ingresses: informers.for(IngressStatus.IngressRef).list(),
      ingressClasses: informers.for(IngressStatus.IngressClassRef).list(),
      services: informers.for(ServiceRef).list(),
      endpointSlices: informers.for(EndpointSliceRef).list(),
      hostPolicy: hostPolicy(state)
    })
  }
  return state.current
}

/** Start the policy informer and watch every source (informers of `informers`) for changes. */
export const make = (client: Client.Client, informers: Informer.Informers, log: (line: string) => void): Effect.Effect<IngressTable, never, Scope.Scope> =>
  Effect.gen(function* () {
    // The admin's host → namespace policy: one ConfigMap in kube-system, which only admins write.
    const { namespace, name } = IngressHosts.PolicyConfigMap
    const policySource = yield* Informer.make(client, ConfigMapRef, { fieldSelector: `metadata.namespace=${namespace},metadata.name=${name}` })
    const state: State = { informers, policySource, log, policyText: "", policy: [], dirty: true, current: undefined, builtAt: 0 }
    for (const ref of refs) informers.for(ref).subscribe(() => (state.dirty = true))
    policySource.subscribe(() => (state.dirty = true))
    return {
      table: () => table(state),
      hostPolicy: () => hostPolicy(state),
      synced: Effect.all([...refs.map((r) => informers.for(r).synced), policySource.synced], { discard: true })
    }
  })
