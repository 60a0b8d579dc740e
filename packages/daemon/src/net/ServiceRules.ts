/**
 * The agent's nftables table for Services (isolated mode): core's `ServiceRules.render` applied
 * with `nft -f`, only when the text differs from what this agent last applied (a resync of an
 * unchanged cluster costs no process), and again whenever the table has gone missing (someone
 * flushed the ruleset). The table is replaced in one transaction, so connections in flight keep
 * their conntrack entries and new ones see either the old rules or the new, never a mix.
 */
import { ServiceRules as Rules } from "@koder/fleet-core"
import * as Nftables from "../box/Nftables.js"

/** Applies rulesets to one table, remembering the last one. */
export class ServiceRulesTable {
  private last: string | undefined

  constructor(readonly table: string = Rules.defaultTable) {}

  /** Apply `input` if it changed (or the table is gone); answers whether nft ran. */
  async apply(input: Omit<Rules.Input, "table">): Promise<boolean> {
    const script = Rules.render({ ...input, table: this.table })
    if (script === this.last && (await Nftables.hasTable("ip", this.table))) return false
    await Nftables.apply(script)
    this.last = script
    return true
  }

  /** Remove the table. */
  async remove(): Promise<void> {
    this.last = undefined
    if (await Nftables.hasTable("ip", this.table)) await Nftables.apply(Rules.teardown(this.table))
  }
}
