/** The `scheduling.k8s.io` group (`pkg/registry/scheduling`): PriorityClass defaults, rules and columns. */
import * as Scheduling from "../../model/Scheduling.js"
import * as Views from "../../object/Views.js"
import type { GroupStrategies } from "../Strategy.js"
import { age } from "./Printing.js"
import { neutral, typed, typedUpdate } from "./Rules.js"

/** The scheduling group's strategies, columns and subresources. */
export const group: GroupStrategies = {
  strategies: {
    "scheduling.k8s.io/v1/PriorityClass": {
      ...neutral,
      defaults: Scheduling.defaults,
      validate: typed(Scheduling.PriorityClass, Scheduling.validatePriorityClass),
      validateUpdate: typedUpdate(Scheduling.PriorityClass, Scheduling.validatePriorityClassUpdate)
    }
  },
  columns: {
    PriorityClass: [
      { name: "Value", type: "integer", value: ".value" },
      { name: "Global-Default", type: "boolean", value: (o) => Views.priorityClass(o).globalDefault === true },
      age,
      { name: "PreemptionPolicy", type: "string", value: ".preemptionPolicy" }
    ]
  },
  withStatus: [],
  scale: {},
  inAll: []
}
