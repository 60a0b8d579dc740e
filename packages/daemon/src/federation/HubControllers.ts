/**
 * What the hub runs beyond the API (DESIGN §9): the federation controllers (member health, the
 * member signer) and, of the built-in controllers, only those that keep the hub's own objects
 * (namespaces, garbage collection, service accounts, quotas, events, alerts). Workloads applied to
 * the hub are templates for members, so nothing schedules or runs them here.
 */
import { type ApiServer, type Client, type Registry, type Controller, MemberConnections, MemberHealth, MemberProxy, MemberSigner, ResourceRefs } from "@koder/fleet-core"
import { Effect, type Scope } from "effect"
import * as MemberCertificates from "./MemberCertificates.js"
import * as PushMembers from "./PushMembers.js"

/** The hub's settings. */
export interface Settings {
  /** How long a member's heartbeat may stop before it is Unknown and NoSchedule (default 40 s). */
  readonly gracePeriodMs: number
  /** A member certificate's lifetime (members renew at two thirds; default 30 days). */
  readonly certificateLifetimeMs?: number
  /** `--auto-approve-members`: new members whose whole name matches are approved without an administrator. */
  readonly autoApprove?: RegExp
  /** Co-located mode (`--hub`): the cluster in the hub's process, its first member. */
  readonly local?: PushMembers.Local
}

/** Built-in controllers the hub does not run: templates are not run on the hub. */
export const notOnTheHub: ReadonlyArray<string> = [
  "scheduler",
  "deployment",
  "replicaset",
  "statefulset",
  "daemonset",
  "job",
  "cronjob",
  "endpoints",
  "endpointslice",
  "service-load-balancer",
  "kubernetes-service",
  "clusterip-repair",
  "node-ipam",
  "node-lifecycle",
  "pod-garbage-collector",
  "disruption",
  "horizontal-pod-autoscaler",
  "persistentvolume-binder",
  "persistentvolume-reclaimer",
  "local-path-provisioner"
]

/** The federation controllers. */
export const reconcilers = (settings: Settings, dataDir: string): ReadonlyArray<Controller.Reconciler> => [
  MemberHealth.reconciler({ gracePeriodMs: settings.gracePeriodMs }),
  MemberSigner.reconciler({
    signer: MemberCertificates.signer(dataDir),
    ...(settings.certificateLifetimeMs === undefined ? {} : { lifetimeMs: settings.certificateLifetimeMs }),
    ...(settings.autoApprove === undefined ? {} : { autoApprove: (member: string) => settings.autoApprove!.test(member) })
  })
]

/**
 * The hub's one API across members: the registry of member connections, the proxy and tunnel
 * subresources, the aggregated reads, and the Push members' agents (PushMembers).
 */
export interface HubApi {
  readonly connections: MemberConnections.Registry
  readonly subresources: ReadonlyArray<ApiServer.SubresourceHandler>
  readonly aggregate: (hub: () => Client.Client) => Registry.Resource
  readonly run: (hub: Client.Client, local?: PushMembers.Local) => Effect.Effect<void, never, Scope.Scope>
}

/** A new HubApi. */
export const api = (): HubApi => {
  const connections = MemberConnections.make()
  return {
    connections,
    subresources: [MemberProxy.proxyHandler(connections), MemberProxy.tunnelHandler(connections)],
    /** The aggregate resource, naming the members `hub` lists. */
    aggregate: (hub: () => Client.Client) =>
      MemberProxy.aggregateResource(
        connections,
        Effect.suspend(() => hub().list(ResourceRefs.MemberCluster)).pipe(Effect.map((list) => (Array.isArray(list["items"]) ? (list["items"] as Array<{ metadata?: { name?: string } }>) : []).map((mc) => mc.metadata?.name ?? "")))
      ),
    run: (hub: Client.Client, local?: PushMembers.Local) =>
      PushMembers.run({ hub, connections, ...(local === undefined ? {} : { local }), onError: (m) => console.error(`koder-fleet hub: push: ${m}`) })
  }
}
