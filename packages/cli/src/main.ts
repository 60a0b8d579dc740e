#!/usr/bin/env node
/**
 * `kfleet`: the command-line entry point.
 */
import { program } from "./Program.js"

await program().parseAsync(process.argv)
