# Sourced by scripts/setup.sh and scripts/test.sh.
# apt_install_missing WHAT PACKAGE...: installs, with apt-get, those of the packages that dpkg
# does not list as installed (with sudo unless root), saying "WHAT: installing ...".
apt_install_missing() {
  local what=$1 p
  shift
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "$what: installing apt packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
