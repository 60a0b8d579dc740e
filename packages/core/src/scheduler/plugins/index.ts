/**
 * The scheduler's plugins, one module per plugin (each exports its upstream `name` and a
 * `factory`), and the registry that maps those names to factories — upstream kube-scheduler's
 * in-tree registry, minus the plugins Fleet does not have (ImageLocality, VolumeRestrictions,
 * NodeVolumeLimits, VolumeZone, DynamicResources, SchedulingGates). Profiles name plugins; the
 * framework builds them from here.
 */
import type { Registry } from "../Framework.js"
import * as BalancedAllocation from "./BalancedAllocation.js"
import * as DefaultBinder from "./DefaultBinder.js"
import * as DefaultPreemption from "./DefaultPreemption.js"
import * as InterPodAffinity from "./InterPodAffinity.js"
import * as NodeAffinityPlugin from "./NodeAffinityPlugin.js"
import * as NodeName from "./NodeName.js"
import * as NodePorts from "./NodePorts.js"
import * as NodeResourcesFit from "./NodeResourcesFit.js"
import * as NodeUnschedulable from "./NodeUnschedulable.js"
import * as PodTopologySpread from "./PodTopologySpread.js"
import * as PrioritySort from "./PrioritySort.js"
import * as TaintTolerationPlugin from "./TaintTolerationPlugin.js"
import * as VolumeBinding from "./VolumeBinding.js"

export {
  BalancedAllocation,
  DefaultBinder,
  DefaultPreemption,
  InterPodAffinity,
  NodeAffinityPlugin,
  NodeName,
  NodePorts,
  NodeResourcesFit,
  NodeUnschedulable,
  PodTopologySpread,
  PrioritySort,
  TaintTolerationPlugin,
  VolumeBinding
}

/** Every plugin module, for the registry. */
const modules = [
  PrioritySort,
  NodeName,
  NodeUnschedulable,
  NodeAffinityPlugin,
  TaintTolerationPlugin,
  NodePorts,
  NodeResourcesFit,
  BalancedAllocation,
  InterPodAffinity,
  PodTopologySpread,
  VolumeBinding,
  DefaultPreemption,
  DefaultBinder
] as const

/** Plugin factories by upstream plugin name (`NodeResourcesFit`, `TaintToleration`, …). */
export const registry: Registry = Object.fromEntries(modules.map((m) => [m.name, m.factory]))
