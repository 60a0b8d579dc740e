/** The `networking.k8s.io` group (`pkg/registry/networking`): Ingress, NetworkPolicy and IPAddress rules and columns. */
import * as Ingress from "../../model/Ingress.js"
import * as Networking from "../../model/Networking.js"
import * as NetworkPolicy from "../../model/NetworkPolicy.js"
import { asArray, asObject, type JsonObject } from "../../object/Json.js"
import * as Views from "../../object/Views.js"
import type { GroupStrategies } from "../Strategy.js"
import { age, str } from "./Printing.js"
import { immutable, neutral, objectAt, typed } from "./Rules.js"

const ingressHosts = (o: JsonObject) => asArray(Views.ingress(o).spec?.rules).map((r) => String(asObject(r)["host"] ?? "*")).join(",") || "*"

const ingressAddress = (o: JsonObject) =>
  asArray(objectAt(Views.ingress(o).status?.loadBalancer)?.["ingress"])
    .map((i) => String(asObject(i)["ip"] ?? asObject(i)["hostname"] ?? ""))
    .join(",")

/** `resource.group/namespace/name` of an IPAddress's parent, as kubectl prints it. */
const ipParent = (o: JsonObject) => {
  const ref = asObject(Views.view<Views.Stored<typeof Networking.IPAddress>>(o).spec?.parentRef)
  const group = str(ref["group"]).toLowerCase()
  const namespace = str(ref["namespace"])
  return `${str(ref["resource"]).toLowerCase()}${group === "" ? "" : `.${group}`}/${namespace === "" ? "" : `${namespace}/`}${str(ref["name"])}`
}

/** The networking group's strategies, columns and subresources. */
export const group: GroupStrategies = {
  strategies: {
    "networking.k8s.io/v1/Ingress": { ...neutral, validate: typed(Ingress.Ingress, Ingress.validate) },
    "networking.k8s.io/v1/NetworkPolicy": {
      ...neutral,
      defaults: (o) => NetworkPolicy.defaults(Views.networkPolicy(o)),
      validate: typed(NetworkPolicy.NetworkPolicy, NetworkPolicy.validate),
      validateUpdate: typed(NetworkPolicy.NetworkPolicy, NetworkPolicy.validate),
      tracksGeneration: true
    },
    "networking.k8s.io/v1/IPAddress": {
      ...neutral,
      validate: typed(Networking.IPAddress, Networking.validateIPAddress),
      validateUpdate: (o, old) => immutable("spec.parentRef", objectAt(o["spec"])?.["parentRef"], objectAt(old["spec"])?.["parentRef"])
    }
  },
  columns: {
    Ingress: [
      { name: "Class", type: "string", value: (o) => Views.ingress(o).spec?.ingressClassName ?? "<none>" },
      { name: "Hosts", type: "string", value: ingressHosts },
      { name: "Address", type: "string", value: ingressAddress },
      { name: "Ports", type: "string", value: (o) => (asArray(Views.ingress(o).spec?.tls).length > 0 ? "80, 443" : "80") },
      age
    ],
    IPAddress: [{ name: "ParentRef", type: "string", value: ipParent }, age]
  },
  withStatus: ["Ingress"],
  scale: {},
  inAll: []
}
