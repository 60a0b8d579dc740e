#!/usr/bin/env node
/**
 * `kfleet`: the command-line entry point.
 */
import { version } from "./index.js"

const [command] = process.argv.slice(2)
if (command === "version" || command === "--version") {
  console.log(`kfleet ${version}`)
} else {
  console.log("kfleet: no commands yet besides `version`; the API server and client arrive with the next issues.")
  if (command !== undefined && command !== "help" && command !== "--help") process.exitCode = 2
}
