# bash completion of tpaudit: its commands, each command's options and their
# values, databases (*.db), JSON reports and directories as PATHs, and after
# `tpaudit run [options] [--]` the command to run, completed as bash would
# complete it. Installed as share/bash-completion/completions/tpaudit (loaded
# on demand by the bash-completion package), or sourced from ~/.bashrc.

_tpaudit_paths() {
    # databases, JSON reports and directories; other files too when nothing else matches
    local cur=$1 IFS=$'\n'
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -X '!*.db' -- "$cur") $(compgen -f -X '!*.json' -- "$cur"))
    ((${#COMPREPLY[@]})) || COMPREPLY=($(compgen -f -- "$cur"))
}

_tpaudit_run() {
    # $1: index of "run" in COMP_WORDS. Options until the first word that is
    # not one (or after --); from there on the words are the command to run.
    local i=$(($1 + 1)) cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    while ((i < COMP_CWORD)); do
        case ${COMP_WORDS[i]} in
        -o | --output) ((i += 2)) ;;
        --) ((i++)); break ;;
        -*) ((i++)) ;;
        *) break ;;
        esac
    done
    if ((i < COMP_CWORD)); then # the arguments of the command to run
        if declare -F _command_offset >/dev/null; then
            _command_offset "$i" # the bash-completion package completes them as for that command
        else
            compopt -o default 2>/dev/null
            COMPREPLY=()
        fi
        return
    fi
    case $prev in
    -o | --output)
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -d -- "$cur"))
        return
        ;;
    esac
    if [[ $cur == -* && $prev != -- ]]; then
        COMPREPLY=($(compgen -W "-o --output --force --fail-fast --peak --help --" -- "$cur"))
    else
        COMPREPLY=($(compgen -c -- "$cur")) # the command to run
    fi
}

_tpaudit() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]} cmd="" at=0 i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        -*) ;;
        *) cmd=${COMP_WORDS[i]} at=$i; break ;;
        esac
    done
    case $cmd in
    "")
        COMPREPLY=($(compgen -W "run report gate diff kinds help --help --version -V" -- "$cur"))
        ;;
    run) _tpaudit_run "$at" ;;
    report)
        case $prev in
        -f | --format) COMPREPLY=($(compgen -W "text json html junit memory-viz" -- "$cur")) ;;
        -o | --output) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")) ;;
        --rank | --steps | --max-events) COMPREPLY=() ;;
        *) if [[ $cur == -* ]]; then
               COMPREPLY=($(compgen -W "-f --format -o --output --rank --steps --max-events --help" -- "$cur"))
           else
               _tpaudit_paths "$cur"
           fi ;;
        esac
        ;;
    gate)
        case $prev in
        --fail-on) COMPREPLY=($(compgen -W "error warning" -- "$cur")) ;;
        --format) COMPREPLY=($(compgen -W "text junit json" -- "$cur")) ;;
        --max-retained|--max-growth|--max-peak) COMPREPLY=($(compgen -W "0 512KiB 64MiB 1GiB" -- "$cur")) ;;
        --max-findings) COMPREPLY=($(compgen -W "0 1 10" -- "$cur")) ;;
        --baseline) _tpaudit_paths "$cur" ;;
        *) if [[ $cur == -* ]]; then
               COMPREPLY=($(compgen -W "--max-retained --max-growth --max-peak --max-findings --fail-on --baseline --allow-incomplete --format --help" -- "$cur"))
           else
               _tpaudit_paths "$cur"
           fi ;;
        esac
        ;;
    diff)
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--exit-zero --help" -- "$cur"))
        else
            _tpaudit_paths "$cur"
        fi
        ;;
    kinds | help) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
    esac
}

complete -F _tpaudit tpaudit
