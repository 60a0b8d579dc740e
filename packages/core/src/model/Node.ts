/**
 * The `Node` kind (v1): a machine that runs pods. The agent reports capacity, conditions and
 * addresses in `status`; the scheduler reads taints and allocatable resources.
 */
import { Schema } from "effect"
import { optional } from "./internal/fields.js"
import { ConditionStatus, ObjectMeta } from "./Meta.js"
import { ResourceList } from "./Quantity.js"
import { Int32, Int64, Time } from "./Scalars.js"

/** What a taint does to pods that do not tolerate it. */
export const TaintEffect = Schema.Literal("NoSchedule", "PreferNoSchedule", "NoExecute")

/** What a taint does to pods that do not tolerate it. */
export type TaintEffect = typeof TaintEffect.Type

/** A taint: repels pods without a matching toleration. */
export const Taint = Schema.Struct({
  key: Schema.String,
  value: optional(Schema.String),
  effect: TaintEffect,
  timeAdded: optional(Time)
})

/** A node taint. */
export type Taint = typeof Taint.Type

/** Node spec: its pod network ranges, schedulability and taints. */
export const NodeSpec = Schema.Struct({
  podCIDR: optional(Schema.String),
  podCIDRs: optional(Schema.Array(Schema.String)),
  unschedulable: optional(Schema.Boolean),
  taints: optional(Schema.Array(Taint)),
  providerID: optional(Schema.String)
})

/** Node spec. */
export type NodeSpec = typeof NodeSpec.Type

/** A node condition such as `Ready` or `MemoryPressure`. */
export const NodeCondition = Schema.Struct({
  type: Schema.String,
  status: ConditionStatus,
  lastHeartbeatTime: optional(Time),
  lastTransitionTime: optional(Time),
  reason: optional(Schema.String),
  message: optional(Schema.String)
})

/** A node condition. */
export type NodeCondition = typeof NodeCondition.Type

/** The kinds of node address. */
export const NodeAddressType = Schema.Literal("Hostname", "InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS")

/** One address of a node. */
export const NodeAddress = Schema.Struct({
  type: NodeAddressType,
  address: Schema.String
})

/** One address of a node. */
export type NodeAddress = typeof NodeAddress.Type

/** Facts about the node's machine and software, reported by the agent. */
export const NodeSystemInfo = Schema.Struct({
  machineID: Schema.String,
  systemUUID: Schema.String,
  bootID: Schema.String,
  kernelVersion: Schema.String,
  osImage: Schema.String,
  containerRuntimeVersion: Schema.String,
  kubeletVersion: Schema.String,
  kubeProxyVersion: Schema.String,
  operatingSystem: Schema.String,
  architecture: Schema.String
})

/** Facts about the node's machine and software. */
export type NodeSystemInfo = typeof NodeSystemInfo.Type

/** The ports the node agent listens on. */
export const NodeDaemonEndpoints = Schema.Struct({
  kubeletEndpoint: optional(Schema.Struct({ Port: Int32 }))
})

/** An image present on the node. */
export const ContainerImage = Schema.Struct({
  names: optional(Schema.Array(Schema.String)),
  sizeBytes: optional(Int64)
})

/** Node status: resources, health, addresses and system facts. */
export const NodeStatus = Schema.Struct({
  capacity: optional(ResourceList),
  allocatable: optional(ResourceList),
  conditions: optional(Schema.Array(NodeCondition)),
  addresses: optional(Schema.Array(NodeAddress)),
  daemonEndpoints: optional(NodeDaemonEndpoints),
  nodeInfo: optional(NodeSystemInfo),
  images: optional(Schema.Array(ContainerImage))
})

/** Node status. */
export type NodeStatus = typeof NodeStatus.Type

/** The `Node` kind (cluster-scoped). */
export const Node = Schema.Struct({
  apiVersion: Schema.Literal("v1"),
  kind: Schema.Literal("Node"),
  metadata: ObjectMeta,
  spec: optional(NodeSpec),
  status: optional(NodeStatus)
})

/** A Node object. */
export type Node = typeof Node.Type
