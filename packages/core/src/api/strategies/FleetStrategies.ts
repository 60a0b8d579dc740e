/** The `fleet.koder.dev` group, Fleet's own kinds: ProcessControl rules, AlertRule defaults, rules and columns. */
import * as AlertRule from "../../model/AlertRule.js"
import * as ProcessControl from "../../model/ProcessControl.js"
import { asObject, type JsonObject } from "../../object/Json.js"
import * as Views from "../../object/Views.js"
import type { GroupStrategies } from "../Strategy.js"
import { age } from "./Printing.js"
import { neutral, objectAt, typed, withDefault, withSpec } from "./Rules.js"

const defaultAlertRuleSpec = (s: JsonObject): JsonObject => {
  const d = AlertRule.defaults
  const threshold = asObject(s["threshold"])
  const webhook = objectAt(s["webhook"])
  let spec: JsonObject = { ...s, threshold: withDefault(withDefault(threshold, "count", d.count), "window", d.window) }
  spec = withDefault(withDefault(withDefault(spec, "severity", d.severity), "resendInterval", d.resendInterval), "sendResolved", d.sendResolved)
  return webhook ? { ...spec, webhook: withDefault(webhook, "timeoutSeconds", d.timeoutSeconds) } : spec
}

/** The fleet group's strategies, columns and subresources. */
export const group: GroupStrategies = {
  strategies: {
    "fleet.koder.dev/v1/ProcessControl": { ...neutral, validate: typed(ProcessControl.ProcessControl, ProcessControl.validate) },
    "fleet.koder.dev/v1/AlertRule": {
      ...neutral,
      defaults: (o) => withSpec(o, defaultAlertRuleSpec),
      prepareForCreate: (o) => ({ ...o, status: {} }),
      validate: typed(AlertRule.AlertRule, AlertRule.validate),
      tracksGeneration: true
    }
  },
  columns: {
    AlertRule: [
      { name: "Firing", type: "boolean", value: (o) => Views.alertRule(o).status?.firing === true },
      { name: "Last Fired", type: "date", value: ".status.lastFiredTime" },
      { name: "Last Delivery", type: "date", value: ".status.lastDeliveryTime" },
      { name: "Error", type: "string", value: (o) => Views.alertRule(o).status?.lastDeliveryError ?? "", priority: 1 },
      age
    ]
  },
  withStatus: ["AlertRule"],
  scale: {},
  inAll: []
}
