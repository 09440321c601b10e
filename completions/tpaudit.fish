# fish completion of tpaudit: its commands, each command's options and their
# values, files as PATHs, and the command after `tpaudit run`. Installed as
# share/fish/vendor_completions.d/tpaudit.fish.

set -l commands run report gate diff kinds
complete -c tpaudit -f
complete -c tpaudit -n "not __fish_seen_subcommand_from $commands" -s V -l version -d 'Print the version'
complete -c tpaudit -n "not __fish_seen_subcommand_from $commands" -s h -l help -d 'List the commands'
complete -c tpaudit -n "not __fish_seen_subcommand_from $commands" -a run -d 'Run a command under the shim, one database per process'
complete -c tpaudit -n "not __fish_seen_subcommand_from $commands" -a report -d 'Render databases as text, JSON, HTML or JUnit'
complete -c tpaudit -n "not __fish_seen_subcommand_from $commands" -a gate -d 'CI gate on retained memory and findings'
complete -c tpaudit -n "not __fish_seen_subcommand_from $commands" -a diff -d 'Findings that appeared, disappeared or grew'
complete -c tpaudit -n "not __fish_seen_subcommand_from $commands" -a kinds -d 'The kinds of finding'
complete -c tpaudit -n "__fish_seen_subcommand_from $commands" -s h -l help -d 'Usage of the command'

# run [-o DIR] [--force] [--fail-fast] [--peak] [--] CMD...
complete -c tpaudit -n "__fish_seen_subcommand_from run" -s o -l output -x -a '(__fish_complete_directories)' -d 'Directory of the databases'
complete -c tpaudit -n "__fish_seen_subcommand_from run" -l force -d 'Remove the databases an earlier run left there'
complete -c tpaudit -n "__fish_seen_subcommand_from run" -l fail-fast -d 'Stop at the first audit with an error'
complete -c tpaudit -n "__fish_seen_subcommand_from run" -l peak -d 'Also audit inside backward for the peak of activations'
complete -c tpaudit -n "__fish_seen_subcommand_from run" -x -a '(__fish_complete_subcommand --fcs-skip=2)'

# report, gate, diff take databases, directories and JSON reports
complete -c tpaudit -n "__fish_seen_subcommand_from report gate diff" -F
complete -c tpaudit -n "__fish_seen_subcommand_from report" -s f -l format -x -a 'text json html junit memory-viz' -d 'Output format'
complete -c tpaudit -n "__fish_seen_subcommand_from report" -s o -l output -r -F -d 'Write to this file'
complete -c tpaudit -n "__fish_seen_subcommand_from report" -l rank -x -d 'memory-viz: only this rank'
complete -c tpaudit -n "__fish_seen_subcommand_from report" -l steps -x -d 'memory-viz: only the steps A:B'
complete -c tpaudit -n "__fish_seen_subcommand_from report" -l max-events -x -d 'memory-viz: the newest N trace entries per device'
complete -c tpaudit -n "__fish_seen_subcommand_from gate" -l max-retained -x -d 'Retained bytes allowed on any one rank (0, 512KiB, 64MiB)'
complete -c tpaudit -n "__fish_seen_subcommand_from gate" -l max-growth -x -d 'Bytes per step one holder may grow on any one rank (0, 512KiB, 64MiB)'
complete -c tpaudit -n "__fish_seen_subcommand_from gate" -l max-peak -x -d 'Bytes a step may save for backward on any one rank (0, 512KiB, 64MiB)'
complete -c tpaudit -n "__fish_seen_subcommand_from gate" -l max-findings -x -d 'Findings at or above --fail-on allowed'
complete -c tpaudit -n "__fish_seen_subcommand_from gate" -l fail-on -x -a 'error warning' -d 'Severity that counts'
complete -c tpaudit -n "__fish_seen_subcommand_from gate" -l baseline -r -F -d 'Count only findings new or grown against this run'
complete -c tpaudit -n "__fish_seen_subcommand_from gate" -l allow-incomplete -d 'Judge an incomplete run instead of exiting 3'
complete -c tpaudit -n "__fish_seen_subcommand_from gate" -l format -x -a 'text junit json' -d 'Output format'
complete -c tpaudit -n "__fish_seen_subcommand_from diff" -l exit-zero -d 'Exit 0 even when a finding appeared or grew'
