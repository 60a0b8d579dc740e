/**
 * Service discovery kinds (v1): `Service` (a stable virtual IP and DNS name for a set of pods
 * chosen by label) and `Endpoints` (the pod addresses currently behind it).
 */
import { Schema } from "effect"
import { optional, StringMap } from "./internal/fields.js"
import { IntOrString } from "./IntOrString.js"
import { makeObjectMeta, ObjectMeta, ObjectReference } from "./Meta.js"
import { Protocol } from "./Pod.js"
import { Int32, PortNumber } from "./Scalars.js"
import * as Validation from "./Validation.js"

/** How a service is exposed. */
export const ServiceType = Schema.Literal("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")

/** How a service is exposed. */
export type ServiceType = typeof ServiceType.Type

/** A port the service exposes and the pod port (number or name) it forwards to. */
export const ServicePort = Schema.Struct({
  name: optional(Schema.String),
  protocol: optional(Protocol),
  appProtocol: optional(Schema.String),
  port: PortNumber,
  targetPort: optional(IntOrString),
  nodePort: optional(Int32)
})

/** A service port. */
export type ServicePort = typeof ServicePort.Type

/** IP families. */
export const IPFamily = Schema.Literal("IPv4", "IPv6")

/** The desired state of a service. */
export const ServiceSpec = Schema.Struct({
  type: optional(ServiceType),
  selector: optional(StringMap),
  ports: optional(Schema.Array(ServicePort)),
  clusterIP: optional(Schema.String),
  clusterIPs: optional(Schema.Array(Schema.String)),
  externalIPs: optional(Schema.Array(Schema.String)),
  sessionAffinity: optional(Schema.Literal("ClientIP", "None")),
  sessionAffinityConfig: optional(
    Schema.Struct({ clientIP: optional(Schema.Struct({ timeoutSeconds: optional(Int32) })) })
  ),
  externalName: optional(Schema.String),
  externalTrafficPolicy: optional(Schema.Literal("Cluster", "Local")),
  internalTrafficPolicy: optional(Schema.Literal("Cluster", "Local")),
  healthCheckNodePort: optional(Int32),
  publishNotReadyAddresses: optional(Schema.Boolean),
  ipFamilies: optional(Schema.Array(IPFamily)),
  ipFamilyPolicy: optional(Schema.Literal("SingleStack", "PreferDualStack", "RequireDualStack")),
  loadBalancerIP: optional(Schema.String),
  loadBalancerSourceRanges: optional(Schema.Array(Schema.String)),
  loadBalancerClass: optional(Schema.String),
  allocateLoadBalancerNodePorts: optional(Schema.Boolean)
})

/** A service spec. */
export type ServiceSpec = typeof ServiceSpec.Type

/** An address a load balancer exposes the service on. */
export const LoadBalancerIngress = Schema.Struct({
  ip: optional(Schema.String),
  hostname: optional(Schema.String),
  ports: optional(
    Schema.Array(Schema.Struct({ port: Int32, protocol: Protocol, error: optional(Schema.String) }))
  )
})

/** The observed state of a service: its load balancer, if any. */
export const ServiceStatus = Schema.Struct({
  loadBalancer: optional(Schema.Struct({ ingress: optional(Schema.Array(LoadBalancerIngress)) }))
})

/** Service metadata: the name is a DNS-1035 label, since it becomes a DNS name and env prefix. */
export const ServiceMeta = makeObjectMeta(Validation.isDNS1035Label)

/** The `Service` kind. */
export const Service = Schema.Struct({
  apiVersion: Schema.Literal("v1"),
  kind: Schema.Literal("Service"),
  metadata: ServiceMeta,
  spec: ServiceSpec,
  status: optional(ServiceStatus)
})

/** A Service object. */
export type Service = typeof Service.Type

/** One backend address and the object (usually a pod) behind it. */
export const EndpointAddress = Schema.Struct({
  ip: Schema.String,
  hostname: optional(Schema.String),
  nodeName: optional(Schema.String),
  targetRef: optional(ObjectReference)
})

/** An endpoint address. */
export type EndpointAddress = typeof EndpointAddress.Type

/** A port on every address of a subset. */
export const EndpointPort = Schema.Struct({
  name: optional(Schema.String),
  port: PortNumber,
  protocol: optional(Protocol),
  appProtocol: optional(Schema.String)
})

/** Addresses sharing a set of ports; not-ready ones are listed apart. */
export const EndpointSubset = Schema.Struct({
  addresses: optional(Schema.Array(EndpointAddress)),
  notReadyAddresses: optional(Schema.Array(EndpointAddress)),
  ports: optional(Schema.Array(EndpointPort))
})

/** An endpoint subset. */
export type EndpointSubset = typeof EndpointSubset.Type

/** The `Endpoints` kind, named after its Service. */
export const Endpoints = Schema.Struct({
  apiVersion: Schema.Literal("v1"),
  kind: Schema.Literal("Endpoints"),
  metadata: ObjectMeta,
  subsets: optional(Schema.Array(EndpointSubset))
})

/** An Endpoints object. */
export type Endpoints = typeof Endpoints.Type
