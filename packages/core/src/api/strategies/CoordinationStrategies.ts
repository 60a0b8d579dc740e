/** The `coordination.k8s.io` group (`pkg/registry/coordination`): the Lease's columns; leases need no strategy. */
import type { GroupStrategies } from "../Strategy.js"
import { age } from "./Printing.js"

/** The coordination group's columns. */
export const group: GroupStrategies = {
  strategies: {},
  columns: { Lease: [{ name: "Holder", type: "string", value: ".spec.holderIdentity" }, age] },
  withStatus: [],
  scale: {},
  inAll: []
}
