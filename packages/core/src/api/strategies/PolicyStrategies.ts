/** The `policy` group (`pkg/registry/policy`): PodDisruptionBudget rules and columns. */
import * as Policy from "../../model/Policy.js"
import * as Views from "../../object/Views.js"
import type { GroupStrategies } from "../Strategy.js"
import { age, num } from "./Printing.js"
import { neutral, typed } from "./Rules.js"

const intOrString = (v: unknown): string => (v === undefined || v === null ? "N/A" : String(v))

/** The policy group's strategies, columns and subresources. */
export const group: GroupStrategies = {
  strategies: {
    "policy/v1/PodDisruptionBudget": {
      ...neutral,
      prepareForCreate: (o) => ({ ...o, status: { disruptionsAllowed: 0, currentHealthy: 0, desiredHealthy: 0, expectedPods: 0 } }),
      validate: typed(Policy.PodDisruptionBudget, Policy.validatePodDisruptionBudget),
      tracksGeneration: true
    }
  },
  columns: {
    PodDisruptionBudget: [
      { name: "Min Available", type: "string", value: (o) => intOrString(Views.podDisruptionBudget(o).spec?.minAvailable) },
      { name: "Max Unavailable", type: "string", value: (o) => intOrString(Views.podDisruptionBudget(o).spec?.maxUnavailable) },
      { name: "Allowed Disruptions", type: "integer", value: (o) => num(Views.podDisruptionBudget(o).status?.disruptionsAllowed) },
      age
    ]
  },
  withStatus: ["PodDisruptionBudget"],
  scale: {},
  inAll: []
}
