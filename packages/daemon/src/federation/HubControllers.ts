/**
 * What the hub runs beyond the API (DESIGN §9): the federation controllers (member health, the
 * member signer) and, of the built-in controllers, only those that keep the hub's own objects
 * (namespaces, garbage collection, service accounts, quotas, events, alerts). Workloads applied to
 * the hub are templates for members, so nothing schedules or runs them here.
 */
import { type Controller, MemberHealth, MemberSigner } from "@koder/fleet-core"
import * as MemberCertificates from "./MemberCertificates.js"

/** The hub's settings. */
export interface Settings {
  /** How long a member's heartbeat may stop before it is Unknown and NoSchedule (default 40 s). */
  readonly gracePeriodMs: number
  /** A member certificate's lifetime (members renew at two thirds; default 30 days). */
  readonly certificateLifetimeMs?: number
  /** `--auto-approve-members`: new members whose whole name matches are approved without an administrator. */
  readonly autoApprove?: RegExp
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
