/**
 * The nominator (upstream's `nominator`): which pending pods wait for room on which node after a
 * preemption, so filters can count their resources as taken there. A nomination made in memory
 * outlives pod versions from the API that do not show it yet.
 */
import * as Views from "../../object/Views.js"
import type { PodInfo } from "../Snapshot.js"

/** The node a pod's `status.nominatedNodeName` names, if any. */
export const nominatedNodeNameOf = (pod: PodInfo): string | undefined => {
  const n = Views.pod(pod.pod).status?.nominatedNodeName
  return typeof n === "string" && n !== "" ? n : undefined
}

/** Nominations by pod and by node. */
export class Nominator {
  private readonly byPod = new Map<string, { readonly node: string; readonly pod: PodInfo }>()
  private readonly byNode = new Map<string, Map<string, PodInfo>>()

  /** Forget the nomination of a pod. */
  remove(uid: string): void {
    const n = this.byPod.get(uid)
    if (n === undefined) return
    this.byPod.delete(uid)
    const m = this.byNode.get(n.node)
    m?.delete(uid)
    if (m !== undefined && m.size === 0) this.byNode.delete(n.node)
  }

  /** Record (or with `undefined` or "", clear) that `pod` waits for room on `node`. */
  nominate(pod: PodInfo, node: string | undefined): void {
    this.remove(pod.uid)
    if (node === undefined || node === "") return
    this.byPod.set(pod.uid, { node, pod })
    let m = this.byNode.get(node)
    if (m === undefined) this.byNode.set(node, (m = new Map()))
    m.set(pod.uid, pod)
  }

  /**
   * On add/update: the pod's own `status.nominatedNodeName` wins; a version without one keeps a
   * nomination made in memory that the API has not caught up with yet, unless the previous
   * version had one (then the API cleared it).
   */
  sync(pod: PodInfo, previous: PodInfo | undefined): void {
    const node = nominatedNodeNameOf(pod)
    if (node !== undefined) return this.nominate(pod, node)
    const kept = this.byPod.get(pod.uid)
    if (kept === undefined) return
    if (previous !== undefined && nominatedNodeNameOf(previous) !== undefined) return this.remove(pod.uid)
    this.nominate(pod, kept.node)
  }

  /** The pods nominated to `node`. */
  nominated(node: string): ReadonlyArray<PodInfo> {
    const m = this.byNode.get(node)
    return m === undefined ? [] : [...m.values()]
  }

  /** The node a pod is nominated to. */
  nodeOf(uid: string): string | undefined {
    return this.byPod.get(uid)?.node
  }
}
