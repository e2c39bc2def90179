{{/*
Names, labels, images and the webhook certificate, shared by every template. The names and
labels are HAMi v2.10's (charts/hami/templates/_helpers.tpl there), so objects keep their names
when a HAMi release is replaced by this chart.
*/}}

{{- define "hami-vgpu.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release name, or <release>-<chart> when the release name does not contain the chart name. */}}
{{- define "hami-vgpu.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "hami-vgpu.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "hami-vgpu.scheduler" -}}
{{- printf "%s-scheduler" (include "hami-vgpu.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami-vgpu.device-plugin" -}}
{{- printf "%s-device-plugin" (include "hami-vgpu.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* DRA mode's kubelet plugin (dra.enabled, docs/DRA.md). */}}
{{- define "hami-vgpu.dra-plugin" -}}
{{- printf "%s-dra-plugin" (include "hami-vgpu.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Whether the scheduler pod runs its own kube-scheduler with hami-scheduler as extender: not in DRA
mode, where the cluster's kube-scheduler allocates claims itself (docs/DRA.md "Deploying").
Renders "true" or "".
*/}}
{{- define "hami.kubeScheduler.enabled" -}}
{{- if and .Values.scheduler.kubeScheduler.enabled (not .Values.dra.enabled) -}}true{{- end -}}
{{- end -}}

{{/* The webhook certificate's Secret (kubernetes.io/tls: ca.crt, tls.crt, tls.key). */}}
{{- define "hami-vgpu.scheduler.tls" -}}
{{- printf "%s-scheduler-tls" (include "hami-vgpu.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami-vgpu.scheduler.webhook" -}}
{{- printf "%s-webhook" (include "hami-vgpu.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami-vgpu.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami-vgpu.labels" -}}
helm.sh/chart: {{ include "hami-vgpu.chart" . }}
{{ include "hami-vgpu.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "hami-vgpu.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hami-vgpu.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
One of this project's images: {{ include "hami.image" (dict "imageRoot" .Values.x.image "root" $) }}.
- registry: global.imageRegistry, else imageRoot.registry.
- repository: imageRoot.repository; HAMi's own images (projecthami/...) hold HAMi's Go binaries,
  so a repository naming one (as HAMi's values file does) becomes ours, hami, and its registry
  (docker.io, where ours is not) localhost unless global.imageRegistry is set.
- tag: imageRoot.tag when set (explicit, used as given); else global.imageTag, unless it is a
  HAMi release tag (v2.10.0: HAMi's values file sets it; ours are tagged without the v); else the
  chart's appVersion.
See README.md "Values" and docs/MIGRATION.md.
*/}}
{{- define "hami.image" -}}
{{- $root := .root -}}
{{- $img := .imageRoot -}}
{{- $global := $root.Values.global | default dict -}}
{{- $registry := $img.registry | default "" | toString -}}
{{- $repository := $img.repository | default "hami" | toString -}}
{{- $globalTag := $global.imageTag | default "" | toString | trim -}}
{{- if regexMatch "^v[0-9]" $globalTag -}}
{{- $globalTag = "" -}}
{{- end -}}
{{- $tag := $img.tag | default "" | toString | trim | default $globalTag | default $root.Chart.AppVersion -}}
{{- if hasPrefix "projecthami/" $repository -}}
{{- $registry = "localhost" -}}
{{- $repository = "hami" -}}
{{- end -}}
{{- if $global.imageRegistry -}}
{{- $registry = $global.imageRegistry | toString -}}
{{- end -}}
{{- if $registry -}}
{{- printf "%s/%s:%s" $registry $repository $tag -}}
{{- else -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}
{{- end -}}

{{/*
The cluster's own kube-scheduler: tag from scheduler.kubeScheduler.image.tag, else the cluster
version stripped to vX.Y.Z (v1.31.1+k3s1 -> v1.31.1), as HAMi does.
*/}}
{{- define "hami.kubeScheduler.image" -}}
{{- $img := .Values.scheduler.kubeScheduler.image -}}
{{- $tag := $img.tag | default "" | toString | trim -}}
{{- if not $tag -}}
{{- $tag = regexReplaceAll "^(v[0-9]+\\.[0-9]+\\.[0-9]+)(.*)$" .Capabilities.KubeVersion.Version "${1}" -}}
{{- end -}}
{{- $registry := $img.registry | default "" | toString -}}
{{- if and .Values.global .Values.global.imageRegistry -}}
{{- $registry = .Values.global.imageRegistry | toString -}}
{{- end -}}
{{- if $registry -}}
{{- printf "%s/%s:%s" $registry $img.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" $img.repository $tag -}}
{{- end -}}
{{- end -}}

{{/*
imagePullSecrets from global.imagePullSecrets and the given images' pullSecrets:
{{ include "hami.imagePullSecrets" (dict "images" (list .Values.x.image) "root" $) }}
Entries may be names or {name: ...} maps.
*/}}
{{- define "hami.imagePullSecrets" -}}
{{- $names := list -}}
{{- range (.root.Values.global.imagePullSecrets | default list) -}}
{{- if kindIs "map" . }}{{ $names = append $names .name }}{{ else }}{{ $names = append $names . }}{{ end -}}
{{- end -}}
{{- range .images -}}
{{- range (.pullSecrets | default list) -}}
{{- if kindIs "map" . }}{{ $names = append $names .name }}{{ else }}{{ $names = append $names . }}{{ end -}}
{{- end -}}
{{- end -}}
{{- if $names -}}
imagePullSecrets:
{{- range ($names | uniq) }}
  - name: {{ . | quote }}
{{- end }}
{{- end -}}
{{- end -}}

{{/*
managedResources of the kube-scheduler extender: every vendor resource this release serves, all
ignoredByScheduler, in HAMi's order (NVIDIA, Cambricon, Hygon, Metax, then the enabled
devices.<vendor>.customresources; awsneuron and amd always).
*/}}
{{- define "hami-vgpu.scheduler.managedResources" -}}
{{- $v := .Values -}}
{{- $names := list $v.resourceName $v.resourceMem $v.resourceCores $v.resourceMemPercentage $v.resourcePriority -}}
{{- $names = concat $names (list $v.mluResourceName $v.dcuResourceName $v.dcuResourceMem $v.dcuResourceCores) -}}
{{- $names = concat $names (list "metax-tech.com/gpu" $v.metaxResourceName $v.metaxResourceCore $v.metaxResourceMem) -}}
{{- $devices := $v.devices | default dict -}}
{{- range $vendor := list "ascend" "mthreads" "enflame" "kunlun" "awsneuron" "iluvatar" "vastai" "biren" "amd" -}}
{{- $d := get $devices $vendor | default dict -}}
{{- if or (has $vendor (list "awsneuron" "amd")) $d.enabled -}}
{{- $names = concat $names ($d.customresources | default list) -}}
{{- end -}}
{{- end -}}
{{- $out := list -}}
{{- range ($names | compact | uniq) -}}
{{- $out = append $out (dict "name" . "ignoredByScheduler" true) -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
The webhook certificate, rendered once per release render and shared (deploy.md §3): the Secret
and the webhook's caBundle must carry the same CA. Reuses the live Secret's ca.crt/tls.crt/tls.key
on upgrade (lookup), else makes a new CA and a serving certificate for the scheduler Service.
Values are base64, as stored in a Secret's data.
*/}}
{{- define "hami-vgpu.webhookCert" -}}
{{- $secret := lookup "v1" "Secret" (include "hami-vgpu.namespace" .) (include "hami-vgpu.scheduler.tls" .) -}}
{{- if and $secret $secret.data (index $secret.data "ca.crt") (index $secret.data "tls.crt") (index $secret.data "tls.key") -}}
caCert: {{ index $secret.data "ca.crt" }}
tlsCert: {{ index $secret.data "tls.crt" }}
tlsKey: {{ index $secret.data "tls.key" }}
{{- else -}}
{{- $svc := include "hami-vgpu.scheduler" . -}}
{{- $ns := include "hami-vgpu.namespace" . -}}
{{- $days := int (.Values.scheduler.certificateValidityDays | default 3650) -}}
{{- $ca := genCA (printf "%s-ca" $svc) $days -}}
{{- $dns := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) -}}
{{- $ips := list -}}
{{- if .Values.scheduler.admissionWebhook.customURL.enabled -}}
{{- $host := .Values.scheduler.admissionWebhook.customURL.host | toString -}}
{{- if regexMatch "^[0-9.]+$" $host -}}
{{- $ips = append $ips $host -}}
{{- else -}}
{{- $dns = append $dns $host -}}
{{- end -}}
{{- end -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $svc $ns) $ips $dns $days $ca -}}
caCert: {{ $ca.Cert | b64enc }}
tlsCert: {{ $cert.Cert | b64enc }}
tlsKey: {{ $cert.Key | b64enc }}
{{- end -}}
{{- end -}}

{{/* True (non-empty) when the chart itself makes the webhook certificate. */}}
{{- define "hami-vgpu.helmMadeCert" -}}
{{- if and .Values.scheduler.admissionWebhook.enabled (not .Values.scheduler.certManager.enabled) -}}
true
{{- end -}}
{{- end -}}
