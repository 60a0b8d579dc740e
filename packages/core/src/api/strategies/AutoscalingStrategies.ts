/** The `autoscaling` group (`pkg/registry/autoscaling`): HorizontalPodAutoscaler defaults, rules and columns. */
import * as Autoscaling from "../../model/Autoscaling.js"
import { asObject } from "../../object/Json.js"
import * as Views from "../../object/Views.js"
import type { GroupStrategies } from "../Strategy.js"
import { age, num, str } from "./Printing.js"
import { neutral, typed } from "./Rules.js"

/** The autoscaling group's strategies, columns and subresources. */
export const group: GroupStrategies = {
  strategies: {
    "autoscaling/v2/HorizontalPodAutoscaler": {
      ...neutral,
      defaults: Autoscaling.defaults,
      prepareForCreate: (o) => ({ ...o, status: { desiredReplicas: 0 } }),
      validate: typed(Autoscaling.HorizontalPodAutoscaler, Autoscaling.validate),
      tracksGeneration: true
    }
  },
  columns: {
    HorizontalPodAutoscaler: [
      {
        name: "Reference",
        type: "string",
        value: (o) => {
          const target = asObject(Views.horizontalPodAutoscaler(o).spec?.scaleTargetRef)
          return `${str(target["kind"])}/${str(target["name"])}`
        }
      },
      { name: "Targets", type: "string", value: Autoscaling.formatTargets },
      {
        name: "MinPods",
        type: "string",
        value: (o) => {
          const min = Views.horizontalPodAutoscaler(o).spec?.minReplicas
          return typeof min === "number" ? String(min) : "<unset>"
        }
      },
      { name: "MaxPods", type: "integer", value: (o) => num(Views.horizontalPodAutoscaler(o).spec?.maxReplicas) },
      { name: "Replicas", type: "integer", value: (o) => num(Views.horizontalPodAutoscaler(o).status?.currentReplicas) },
      age
    ]
  },
  withStatus: ["HorizontalPodAutoscaler"],
  scale: {},
  inAll: ["HorizontalPodAutoscaler"]
}
