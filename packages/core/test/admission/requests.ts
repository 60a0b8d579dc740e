// Admission requests for the pure decisions' tables.
import type * as Admission from "../../src/api/Admission.js"
import type { UserInfo } from "../../src/api/Http.js"
import * as Registry from "../../src/api/Registry.js"

const registry = Registry.make()

export const resource = (group: string, plural: string): Registry.Resource =>
  registry.all().find((r) => r.group === group && r.plural === plural)!

export const admin: UserInfo = { name: "admin", uid: "a", groups: ["system:masters"] }
export const nodeUser = (name: string): UserInfo => ({ name: `system:node:${name}`, uid: name, groups: ["system:nodes", "system:authenticated"] })

export const request = (
  operation: Admission.Operation,
  group: string,
  plural: string,
  fields: Partial<Omit<Admission.Request, "operation" | "resource">> = {}
): Admission.Request => ({
  operation,
  user: admin,
  resource: resource(group, plural),
  subresource: "",
  namespace: "",
  name: "",
  object: {},
  oldObject: undefined,
  dryRun: false,
  ...fields
})
