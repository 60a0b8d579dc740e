/**
 * The node IPAM controller (kube-controller-manager's `nodeipam`, range allocator): gives each
 * Node without one a block of the cluster CIDR as `spec.podCIDR` / `spec.podCIDRs` — the lowest
 * block no other Node holds. The block is written on the Node, so it survives restarts of
 * anything (the Node object is the record; there is no allocator state to lose), and
 * `spec.podCIDR` is immutable once set (the API refuses a change), as in Kubernetes. A deleted
 * Node's block is free again.
 *
 * No two Nodes get one block: one worker decides at a time, on an informer view that includes
 * its own earlier writes (the runner waits for them), and each write is pinned to the Node's
 * resourceVersion. A full cluster CIDR is reported with a `CIDRNotAvailable` Event and retried.
 */
import { Effect, Either } from "effect"
import type * as Client from "../client/Client.js"
import * as NodeRoutes from "../network/NodeRoutes.js"
import * as PodCidr from "../network/PodCidr.js"
import type * as Controller from "./Controller.js"
import { type JsonObject } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"


/** The Node resource. */
export const NodeRef: Client.ResourceRef = { apiVersion: "v1", kind: "Node" }

/** Options of the controller. */
export interface Options {
  /** The CIDR node blocks are cut from (default `10.42.0.0/16`). */
  readonly clusterCidr?: string
  /** Prefix length of each node's block (default 24). */
  readonly nodeMaskSize?: number
  /** How soon a Node that found the cluster CIDR full is looked at again (default 30 s). */
  readonly retryFullMs?: number
}

/** What to do for one Node (pure): nothing, assign a block, or report that none is left. */
export type Decision = { readonly _tag: "Keep" } | { readonly _tag: "Assign"; readonly cidr: string } | { readonly _tag: "Full" }

/** Decide for `node` given every Node (itself included). */
export const decide = (plan: PodCidr.Plan, node: JsonObject, nodes: ReadonlyArray<JsonObject>): Decision => {
  if (NodeRoutes.podCidrsOf(node).length > 0) return { _tag: "Keep" }
  const name = metadataOf(node)["name"]
  const taken = nodes.filter((n) => metadataOf(n)["name"] !== name).flatMap(NodeRoutes.podCidrsOf)
  const cidr = PodCidr.firstFree(plan, taken)
  return cidr === undefined ? { _tag: "Full" } : { _tag: "Assign", cidr }
}

/** The node IPAM reconciler (keys: Node names). Fails to build on a malformed cluster CIDR. */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  const planned = PodCidr.plan(options.clusterCidr ?? PodCidr.defaultClusterCidr, options.nodeMaskSize ?? PodCidr.defaultNodeMaskSize)
  if (Either.isLeft(planned)) throw new Error(`node IPAM: ${planned.left}`)
  const plan = planned.right
  return {
    name: "node-ipam",
    primary: NodeRef,
    // One decision at a time: two workers could hand one block to two Nodes.
    workers: 1,
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        const informer = ctx.informers.for(NodeRef)
        const node = informer.get(undefined, key)
        if (node === undefined) return
        const decision = decide(plan, node, informer.list())
        if (decision._tag === "Keep") return
        if (decision._tag === "Full") {
          yield* ctx.events.record({ apiVersion: "v1", kind: "Node", ...node }, "Warning", "CIDRNotAvailable", `Node ${key} status is now: CIDRNotAvailable (${plan.cluster.cidr} has no free /${plan.nodeMaskSize})`)
          return { requeueAfterMs: options.retryFullMs ?? 30_000 }
        }
        yield* ctx.client.patch(NodeRef, undefined, key, "merge", {
          metadata: { resourceVersion: metadataOf(node)["resourceVersion"] },
          spec: { podCIDR: decision.cidr, podCIDRs: [decision.cidr] }
        }).pipe(
          // Gone meanwhile: nothing to do. A conflict is retried on a fresh view.
          Effect.catchIf((e) => e.status.code === 404, () => Effect.void)
        )
      })
  }
}
