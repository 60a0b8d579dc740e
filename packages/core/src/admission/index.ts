/**
 * The built-in admission chain (DESIGN §5, §10), in kube-apiserver's order. Every plugin's
 * `mutate` runs first, in this order, then every plugin's `validate`, in this order:
 *
 *   NamespaceLifecycle ─ NodeRestriction ─ DefaultServiceAccount ─ PodSecurity ─ Priority ─ DefaultTolerationSeconds
 *     ─ LimitRanger ─ MutatingAdmissionWebhook ─ RegionLabel ─ ValidatingAdmissionWebhook
 *     ─ IngressHostOwnership ─ ResourceQuota ─ ClusterIpAllocator ─ NodePortAllocator
 *
 * NodeRestriction refuses before any webhook sees a node's request; RegionLabel follows the
 * mutating webhooks so the region label is the last word; ResourceQuota is last so usage is
 * reserved only for writes every other plugin accepted (and is re-run alone-cheaply on a lost
 * compare-and-swap). ClusterIpAllocator stands where kube-apiserver's Service registry allocates:
 * after everything else, its IPAddress writes joined to the Service's own transaction; NodePortAllocator
 * likewise for node ports.
 */
import { Effect, type Scope } from "effect"
import type * as Admission from "../api/Admission.js"
import type { Transformer } from "../api/Transformer.js"
import type { StoreService } from "../store/Store.js"
import * as ClusterIpAllocator from "./ClusterIpAllocator.js"
import * as CsrRequester from "./CsrRequester.js"
import * as DefaultServiceAccount from "./DefaultServiceAccount.js"
import * as DefaultTolerationSeconds from "./DefaultTolerationSeconds.js"
import * as IngressHostOwnership from "./IngressHostOwnership.js"
import * as LimitRanger from "./LimitRanger.js"
import * as Priority from "./Priority.js"
import * as DefaultStorageClass from "./DefaultStorageClass.js"
import * as PersistentVolumeClaimResize from "./PersistentVolumeClaimResize.js"
import * as NamespaceLifecycle from "./NamespaceLifecycle.js"
import * as NodePortAllocator from "./NodePortAllocator.js"
import * as MemberRestriction from "./MemberRestriction.js"
import * as NodeRestriction from "./NodeRestriction.js"
import * as PodSecurity from "./PodSecurityAdmission.js"
import * as RegionLabel from "./RegionLabel.js"
import * as ResourceQuota from "./ResourceQuotaAdmission.js"
import * as Webhooks from "./Webhooks.js"

export * as ClusterIpAllocator from "./ClusterIpAllocator.js"
export * as CsrRequester from "./CsrRequester.js"
export * as DefaultServiceAccount from "./DefaultServiceAccount.js"
export * as DefaultTolerationSeconds from "./DefaultTolerationSeconds.js"
export * as IngressHostOwnership from "./IngressHostOwnership.js"
export * as LimitRanger from "./LimitRanger.js"
export * as NamespaceLifecycle from "./NamespaceLifecycle.js"
export * as NodePortAllocator from "./NodePortAllocator.js"
export * as MemberRestriction from "./MemberRestriction.js"
export * as NodeRestriction from "./NodeRestriction.js"
export * as PodSecurity from "./PodSecurityAdmission.js"
export * as Priority from "./Priority.js"
export * as DefaultStorageClass from "./DefaultStorageClass.js"
export * as PersistentVolumeClaimResize from "./PersistentVolumeClaimResize.js"
export * as RegionLabel from "./RegionLabel.js"
export * as ResourceQuota from "./ResourceQuotaAdmission.js"
export * as Webhooks from "./Webhooks.js"

/** The plugin names of the default chain, in order. */
export const order: ReadonlyArray<string> = [
  NamespaceLifecycle.name,
  NodeRestriction.name,
  MemberRestriction.name,
  CsrRequester.name,
  DefaultServiceAccount.name,
  PodSecurity.name,
  Priority.name,
  DefaultTolerationSeconds.name,
  PersistentVolumeClaimResize.name,
  DefaultStorageClass.name,
  LimitRanger.name,
  "MutatingAdmissionWebhook",
  RegionLabel.name,
  "ValidatingAdmissionWebhook",
  IngressHostOwnership.name,
  ResourceQuota.name,
  ClusterIpAllocator.name,
  NodePortAllocator.name
]

/** What the default chain is built from. */
export interface Options {
  readonly store: StoreService
  /** The server's region (the RegionLabel default). */
  readonly region: string
  /** The API server's transformer, so plugins read and write stored objects as it does. */
  readonly transformer?: Transformer
  /** The webhook transport; without it there are no webhook plugins. */
  readonly call?: Webhooks.Call
  readonly serviceAccount?: DefaultServiceAccount.Options
  /** Pod Security defaults and exemptions (default: `privileged` in every mode, as kube-apiserver). */
  readonly podSecurity?: Omit<PodSecurity.Options, "store" | "transformer">
  /** Default NoExecute toleration seconds of pods (300 s each). */
  readonly tolerations?: DefaultTolerationSeconds.Options
  /** `--service-cluster-ip-range` (default `10.96.0.0/12`). */
  readonly serviceClusterIpRange?: string
  /** `--service-node-port-range` (default `30000-32767`). */
  readonly serviceNodePortRange?: string
}

/**
 * The default chain. Webhook configurations are followed, and quota usage recounted, for as
 * long as the scope lives.
 */
export const make = (options: Options): Effect.Effect<ReadonlyArray<Admission.Plugin>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const stored = { store: options.store, ...(options.transformer === undefined ? {} : { transformer: options.transformer }) }
    const webhooks = options.call === undefined ? undefined : yield* Webhooks.make({ ...stored, call: options.call })
    return [
      NamespaceLifecycle.make(stored),
      NodeRestriction.make(),
      MemberRestriction.make(),
      CsrRequester.make(),
      DefaultServiceAccount.make({ ...stored, ...options.serviceAccount }),
      PodSecurity.make({ ...stored, ...options.podSecurity }),
      Priority.make(stored),
      DefaultTolerationSeconds.make(options.tolerations),
      PersistentVolumeClaimResize.make(stored),
      DefaultStorageClass.make(stored),
      LimitRanger.make(stored),
      ...(webhooks === undefined ? [] : [webhooks.mutating]),
      RegionLabel.make({ region: options.region }),
      ...(webhooks === undefined ? [] : [webhooks.validating]),
      IngressHostOwnership.make(stored),
      ResourceQuota.make(stored),
      ClusterIpAllocator.make({ ...stored, ...(options.serviceClusterIpRange === undefined ? {} : { range: options.serviceClusterIpRange }) }),
      NodePortAllocator.make({ ...stored, ...(options.serviceNodePortRange === undefined ? {} : { range: options.serviceNodePortRange }) })
    ]
  })
