/** The `discovery.k8s.io` group (`pkg/registry/discovery`): EndpointSlice defaults, rules and columns. */
import * as EndpointSlice from "../../model/EndpointSlice.js"
import { asArray, asObject } from "../../object/Json.js"
import * as Views from "../../object/Views.js"
import type { GroupStrategies } from "../Strategy.js"
import { age, str } from "./Printing.js"
import { neutral, typed, typedUpdate, withDefault } from "./Rules.js"

/** kubectl's `formatDiscoveryPorts`/`formatDiscoveryEndpoints`: three items, then "+ N more...". */
const listWithMore = (items: ReadonlyArray<string>): string => {
  if (items.length === 0) return "<unset>"
  const shown = items.slice(0, 3).join(",")
  return items.length > 3 ? `${shown} + ${items.length - 3} more...` : shown
}

const portText = (p: unknown) => {
  const port = asObject(p)
  return typeof port["port"] === "number" ? String(port["port"]) : str(port["name"]) || "*"
}

/** The discovery group's strategies, columns and subresources. */
export const group: GroupStrategies = {
  strategies: {
    "discovery.k8s.io/v1/EndpointSlice": {
      ...neutral,
      defaults: (o) =>
        Array.isArray(o["ports"]) ? { ...o, ports: o["ports"].map((p) => withDefault(withDefault(asObject(p), "name", ""), "protocol", "TCP")) } : o,
      validate: typed(EndpointSlice.EndpointSlice, EndpointSlice.validate),
      validateUpdate: typedUpdate(EndpointSlice.EndpointSlice, EndpointSlice.validateUpdate)
    }
  },
  columns: {
    EndpointSlice: [
      { name: "AddressType", type: "string", value: (o) => str(Views.endpointSlice(o).addressType) },
      { name: "Ports", type: "string", value: (o) => listWithMore(asArray(Views.endpointSlice(o).ports).map(portText)) },
      {
        name: "Endpoints",
        type: "string",
        value: (o) => listWithMore(asArray(Views.endpointSlice(o).endpoints).flatMap((e) => asArray(asObject(e)["addresses"]).map(str)))
      },
      age
    ]
  },
  withStatus: [],
  scale: {},
  inAll: []
}
