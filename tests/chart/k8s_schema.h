// A compact schema check for the objects the chart renders (Debian packages no kubeconform).
// The table below lists, per Kubernetes kind the chart can render, the fields of its API type
// (k8s.io/api at v1.32, resource.k8s.io/v1 at v1.34, cert-manager v1, prometheus-operator v1,
// kube-scheduler config v1), so an unknown or misspelt field fails, as it does on an API server
// that validates strictly (helm's fieldValidation=Strict). Scalars are checked the way helm's
// YAML-to-JSON step sees them: a plain `1`, `true` or `on` is a number or a bool, and fails where
// the API wants a string. Subtrees the chart only copies from values (affinity terms other than
// podAntiAffinity, probes' exec, ...) are `any`. Header-only.
#ifndef HAMI_TESTS_CHART_K8S_SCHEMA_H_
#define HAMI_TESTS_CHART_K8S_SCHEMA_H_

#include <yaml-cpp/yaml.h>

#include <regex>
#include <string>
#include <vector>

namespace hami::chart_test {

// Type expressions: a scalar name (string, int, bool, intstr, quantity, any, or a type below),
// a one-element sequence (a list of that type), or a map (a struct with exactly those fields;
// the key "*" instead: a map with any keys whose values have that type).
inline constexpr const char* kSchemaYaml = R"yaml(
kinds:
  ConfigMap: v1
  Secret: v1
  Service: v1
  ServiceAccount: v1
  Deployment: apps/v1
  DaemonSet: apps/v1
  PodDisruptionBudget: policy/v1
  ClusterRole: rbac.authorization.k8s.io/v1
  ClusterRoleBinding: rbac.authorization.k8s.io/v1
  Role: rbac.authorization.k8s.io/v1
  RoleBinding: rbac.authorization.k8s.io/v1
  MutatingWebhookConfiguration: admissionregistration.k8s.io/v1
  RuntimeClass: node.k8s.io/v1
  DeviceClass: resource.k8s.io/v1
  ServiceMonitor: monitoring.coreos.com/v1
  Issuer: cert-manager.io/v1
  Certificate: cert-manager.io/v1
  KubeSchedulerConfiguration: kubescheduler.config.k8s.io/v1
types:
  smap: {"*": string}
  ObjectMeta:
    {name: string, generateName: string, namespace: string, selfLink: string, uid: string,
     resourceVersion: string, generation: int, creationTimestamp: string,
     deletionTimestamp: string, deletionGracePeriodSeconds: int, labels: smap,
     annotations: smap, ownerReferences: any, finalizers: [string], managedFields: any}
  ConfigMap:
    {apiVersion: string, kind: string, metadata: ObjectMeta, data: smap, binaryData: smap,
     immutable: bool}
  Secret:
    {apiVersion: string, kind: string, metadata: ObjectMeta, data: smap, stringData: smap,
     type: string, immutable: bool}
  ServiceAccount:
    {apiVersion: string, kind: string, metadata: ObjectMeta, secrets: any,
     imagePullSecrets: [LocalObjectReference], automountServiceAccountToken: bool}
  LocalObjectReference: {name: string}
  Service: {apiVersion: string, kind: string, metadata: ObjectMeta, spec: ServiceSpec, status: any}
  ServiceSpec:
    {ports: [ServicePort], selector: smap, clusterIP: string, clusterIPs: [string], type: string,
     externalIPs: [string], sessionAffinity: string, loadBalancerIP: string,
     loadBalancerSourceRanges: [string], externalName: string, externalTrafficPolicy: string,
     healthCheckNodePort: int, publishNotReadyAddresses: bool, sessionAffinityConfig: any,
     ipFamilies: [string], ipFamilyPolicy: string, allocateLoadBalancerNodePorts: bool,
     loadBalancerClass: string, internalTrafficPolicy: string, trafficDistribution: string}
  ServicePort:
    {name: string, protocol: string, appProtocol: string, port: int, targetPort: intstr,
     nodePort: int}
  Deployment:
    {apiVersion: string, kind: string, metadata: ObjectMeta, spec: DeploymentSpec, status: any}
  DeploymentSpec:
    {replicas: int, selector: LabelSelector, template: PodTemplateSpec,
     strategy: {type: string, rollingUpdate: {maxUnavailable: intstr, maxSurge: intstr}},
     minReadySeconds: int, revisionHistoryLimit: int, paused: bool,
     progressDeadlineSeconds: int}
  DaemonSet:
    {apiVersion: string, kind: string, metadata: ObjectMeta, spec: DaemonSetSpec, status: any}
  DaemonSetSpec:
    {selector: LabelSelector, template: PodTemplateSpec,
     updateStrategy: {type: string, rollingUpdate: {maxUnavailable: intstr, maxSurge: intstr}},
     minReadySeconds: int, revisionHistoryLimit: int}
  LabelSelector:
    {matchLabels: smap, matchExpressions: [{key: string, operator: string, values: [string]}]}
  PodTemplateSpec: {metadata: ObjectMeta, spec: PodSpec}
  PodSpec:
    {volumes: [Volume], initContainers: [Container], containers: [Container],
     ephemeralContainers: any, restartPolicy: string, terminationGracePeriodSeconds: int,
     activeDeadlineSeconds: int, dnsPolicy: string, nodeSelector: smap,
     serviceAccountName: string, serviceAccount: string, automountServiceAccountToken: bool,
     nodeName: string, hostNetwork: bool, hostPID: bool, hostIPC: bool,
     shareProcessNamespace: bool, securityContext: any,
     imagePullSecrets: [LocalObjectReference], hostname: string, subdomain: string,
     affinity: Affinity, schedulerName: string, tolerations: [Toleration], hostAliases: any,
     priorityClassName: string, priority: int, dnsConfig: any, readinessGates: any,
     runtimeClassName: string, enableServiceLinks: bool, preemptionPolicy: string,
     overhead: {"*": quantity}, topologySpreadConstraints: any, setHostnameAsFQDN: bool,
     os: {name: string}, hostUsers: bool, schedulingGates: any, resourceClaims: any,
     resources: ResourceRequirements}
  Toleration:
    {key: string, operator: string, value: string, effect: string, tolerationSeconds: int}
  Affinity:
    {nodeAffinity: any, podAffinity: any,
     podAntiAffinity:
       {requiredDuringSchedulingIgnoredDuringExecution: [PodAffinityTerm],
        preferredDuringSchedulingIgnoredDuringExecution:
          [{weight: int, podAffinityTerm: PodAffinityTerm}]}}
  PodAffinityTerm:
    {labelSelector: LabelSelector, namespaces: [string], topologyKey: string,
     namespaceSelector: LabelSelector, matchLabelKeys: [string], mismatchLabelKeys: [string]}
  Container:
    {name: string, image: string, command: [string], args: [string], workingDir: string,
     ports: [{name: string, hostPort: int, containerPort: int, protocol: string, hostIP: string}],
     envFrom: any, env: [EnvVar], resources: ResourceRequirements, resizePolicy: any,
     restartPolicy: string, volumeMounts: [VolumeMount], volumeDevices: any,
     livenessProbe: Probe, readinessProbe: Probe, startupProbe: Probe, lifecycle: any,
     terminationMessagePath: string, terminationMessagePolicy: string,
     imagePullPolicy: string, securityContext: SecurityContext, stdin: bool, stdinOnce: bool,
     tty: bool}
  EnvVar:
    {name: string, value: string,
     valueFrom: {fieldRef: {apiVersion: string, fieldPath: string}, resourceFieldRef: any,
                 configMapKeyRef: any, secretKeyRef: any}}
  ResourceRequirements: {limits: {"*": quantity}, requests: {"*": quantity}, claims: any}
  VolumeMount:
    {name: string, readOnly: bool, recursiveReadOnly: string, mountPath: string,
     subPath: string, mountPropagation: string, subPathExpr: string}
  Probe:
    {exec: any, httpGet: {path: string, port: intstr, host: string, scheme: string,
                          httpHeaders: [{name: string, value: string}]},
     tcpSocket: any, grpc: any, initialDelaySeconds: int, timeoutSeconds: int,
     periodSeconds: int, successThreshold: int, failureThreshold: int,
     terminationGracePeriodSeconds: int}
  SecurityContext:
    {capabilities: {add: [string], drop: [string]}, privileged: bool, seLinuxOptions: any,
     windowsOptions: any, runAsUser: int, runAsGroup: int, runAsNonRoot: bool,
     readOnlyRootFilesystem: bool, allowPrivilegeEscalation: bool, procMount: string,
     seccompProfile: any, appArmorProfile: any}
  Volume:
    {name: string, hostPath: {path: string, type: string},
     configMap: {name: string, items: any, defaultMode: int, optional: bool},
     secret: {secretName: string, items: any, defaultMode: int, optional: bool},
     emptyDir: any, projected: any, downwardAPI: any, persistentVolumeClaim: any, csi: any,
     ephemeral: any, nfs: any, image: any}
  PodDisruptionBudget:
    {apiVersion: string, kind: string, metadata: ObjectMeta, status: any,
     spec: {minAvailable: intstr, maxUnavailable: intstr, selector: LabelSelector,
            unhealthyPodEvictionPolicy: string}}
  PolicyRule:
    {verbs: [string], apiGroups: [string], resources: [string], resourceNames: [string],
     nonResourceURLs: [string]}
  ClusterRole:
    {apiVersion: string, kind: string, metadata: ObjectMeta, rules: [PolicyRule],
     aggregationRule: any}
  Role: {apiVersion: string, kind: string, metadata: ObjectMeta, rules: [PolicyRule]}
  RoleBinding:
    {apiVersion: string, kind: string, metadata: ObjectMeta,
     subjects: [{kind: string, apiGroup: string, name: string, namespace: string}],
     roleRef: {apiGroup: string, kind: string, name: string}}
  ClusterRoleBinding: RoleBinding
  MutatingWebhookConfiguration:
    {apiVersion: string, kind: string, metadata: ObjectMeta, webhooks: [MutatingWebhook]}
  MutatingWebhook:
    {name: string,
     clientConfig: {url: string, caBundle: string,
                    service: {namespace: string, name: string, path: string, port: int}},
     rules: [{operations: [string], apiGroups: [string], apiVersions: [string],
              resources: [string], scope: string}],
     failurePolicy: string, matchPolicy: string, namespaceSelector: LabelSelector,
     objectSelector: LabelSelector, sideEffects: string, timeoutSeconds: int,
     admissionReviewVersions: [string], reinvocationPolicy: string, matchConditions: any}
  RuntimeClass:
    {apiVersion: string, kind: string, metadata: ObjectMeta, handler: string, overhead: any,
     scheduling: any}
  DeviceClass:
    {apiVersion: string, kind: string, metadata: ObjectMeta,
     spec: {selectors: [{cel: {expression: string}}], config: any,
            extendedResourceName: string}}
  ServiceMonitor:
    {apiVersion: string, kind: string, metadata: ObjectMeta,
     spec: {selector: LabelSelector, namespaceSelector: any, jobLabel: string,
            targetLabels: [string], podTargetLabels: [string], sampleLimit: int,
            endpoints: [{port: string, targetPort: intstr, path: string, scheme: string,
                         params: any, interval: string, scrapeTimeout: string,
                         tlsConfig: any, bearerTokenFile: string, bearerTokenSecret: any,
                         authorization: any, honorLabels: bool, honorTimestamps: bool,
                         basicAuth: any, oauth2: any, metricRelabelings: any,
                         relabelings: any, proxyUrl: string, followRedirects: bool,
                         enableHttp2: bool, filterRunning: bool}]}}
  Issuer:
    {apiVersion: string, kind: string, metadata: ObjectMeta, status: any,
     spec: {selfSigned: {crlDistributionPoints: [string]}, ca: any, acme: any, vault: any,
            venafi: any}}
  Certificate:
    {apiVersion: string, kind: string, metadata: ObjectMeta, status: any,
     spec: {secretName: string, commonName: string, dnsNames: [string], ipAddresses: [string],
            uris: [string], emailAddresses: [string], duration: string, renewBefore: string,
            isCA: bool, usages: [string], subject: any, privateKey: any, secretTemplate: any,
            keystores: any, revisionHistoryLimit: int,
            issuerRef: {name: string, kind: string, group: string}}}
  KubeSchedulerConfiguration:
    {apiVersion: string, kind: string, parallelism: int,
     leaderElection: {leaderElect: bool, leaseDuration: string, renewDeadline: string,
                      retryPeriod: string, resourceLock: string, resourceName: string,
                      resourceNamespace: string},
     clientConnection: {kubeconfig: string, acceptContentTypes: string, contentType: string,
                        qps: quantity, burst: int},
     enableProfiling: bool, enableContentionProfiling: bool, percentageOfNodesToScore: int,
     podInitialBackoffSeconds: int, podMaxBackoffSeconds: int, delayCacheUntilActive: bool,
     profiles: [{schedulerName: string, percentageOfNodesToScore: int, plugins: any,
                 pluginConfig: any}],
     extenders: [{urlPrefix: string, filterVerb: string, preemptVerb: string,
                  prioritizeVerb: string, weight: int, bindVerb: string, enableHTTPS: bool,
                  tlsConfig: {insecure: bool, serverName: string, certFile: string,
                              keyFile: string, caFile: string, certData: string,
                              keyData: string, caData: string},
                  httpTimeout: string, nodeCacheCapable: bool,
                  managedResources: [{name: string, ignoredByScheduler: bool}],
                  ignorable: bool}]}
)yaml";

// Checks objects against kSchemaYaml. Thread-compatible; construct once per test.
class Schema {
 public:
  Schema() : root_(YAML::Load(kSchemaYaml)) {}

  // Every problem of one rendered object, each as "<kind>/<name>: <path>: <what>"; empty when
  // the kind is known, apiVersion matches, metadata.name is set and every field is known and
  // of the right type.
  std::vector<std::string> Check(const YAML::Node& object) const {
    std::vector<std::string> errors;
    const std::string kind = object.IsMap() ? Scalar(object["kind"]) : "";
    const YAML::Node metadata = object.IsMap() ? object["metadata"] : YAML::Node();
    const std::string name = metadata && metadata.IsMap() ? Scalar(metadata["name"]) : "";
    const std::string where = (kind.empty() ? "?" : kind) + "/" + (name.empty() ? "?" : name);
    if (!object.IsMap()) return {where + ": not a map"};
    const YAML::Node want_version = root_["kinds"][kind];
    if (!want_version) return {where + ": kind \"" + kind + "\" is not in the schema"};
    if (Scalar(object["apiVersion"]) != want_version.Scalar()) {
      errors.push_back(where + ": apiVersion \"" + Scalar(object["apiVersion"]) + "\", want \"" +
                       want_version.Scalar() + "\"");
    }
    if (kind != "KubeSchedulerConfiguration" && name.empty()) {
      errors.push_back(where + ": metadata.name is empty");
    }
    CheckNode(object, YAML::Node(kind), "", &errors, where);
    return errors;
  }

 private:
  static std::string Scalar(const YAML::Node& n) {
    return n && n.IsScalar() ? n.Scalar() : std::string();
  }
  // A plain (unquoted) scalar as YAML 1.1 (helm's sigs.k8s.io/yaml) reads it.
  static bool Plain(const YAML::Node& n) { return n.Tag() == "?"; }
  static bool LooksInt(const std::string& s) {
    static const std::regex re("[-+]?[0-9]+");
    return std::regex_match(s, re);
  }
  static bool LooksFloat(const std::string& s) {
    static const std::regex re(
        R"([-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))");
    return std::regex_match(s, re);
  }
  static bool LooksBool(const std::string& s) {
    static const std::regex re(
        "y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF");
    return std::regex_match(s, re);
  }

  void CheckScalar(const YAML::Node& node, const std::string& type, const std::string& path,
                   std::vector<std::string>* errors, const std::string& where) const {
    auto fail = [&](const std::string& what) {
      errors->push_back(where + ": " + path + ": " + what);
    };
    if (type == "any") return;
    const bool plain = Plain(node);
    const std::string v = node.IsScalar() ? node.Scalar() : "";
    if (type == "string" || type == "intstr" || type == "quantity") {
      if (!node.IsScalar()) return fail("want a " + type + ", got a " + NodeKind(node));
      if (!plain) return;
      const bool is_int = LooksInt(v);
      if (LooksBool(v)) return fail("want a " + type + ", got the bool " + v + " (quote it)");
      if (type == "string" && (is_int || LooksFloat(v))) {
        return fail("want a string, got the number " + v + " (quote it)");
      }
      if (type == "intstr" && !is_int && LooksFloat(v)) {
        return fail("want an int or a string, got the number " + v);
      }
      return;
    }
    if (type == "int") {
      if (!node.IsScalar() || !plain || !LooksInt(v)) {
        return fail("want an integer, got " + (node.IsScalar() ? "\"" + v + "\"" : NodeKind(node)));
      }
      return;
    }
    if (type == "bool") {
      if (!node.IsScalar() || !plain || (v != "true" && v != "false")) {
        return fail("want true or false, got " +
                    (node.IsScalar() ? "\"" + v + "\"" : NodeKind(node)));
      }
      return;
    }
    const YAML::Node named = root_["types"][type];
    if (!named) return fail("schema has no type \"" + type + "\"");
    CheckNode(node, named, path, errors, where);
  }

  void CheckNode(const YAML::Node& node, const YAML::Node& type, const std::string& path,
                 std::vector<std::string>* errors, const std::string& where) const {
    if (node.IsNull()) return;  // the API server treats null as unset
    if (type.IsScalar()) return CheckScalar(node, type.Scalar(), path, errors, where);
    if (type.IsSequence()) {
      if (!node.IsSequence()) {
        errors->push_back(where + ": " + path + ": want a list, got a " + NodeKind(node));
        return;
      }
      for (size_t i = 0; i < node.size(); ++i) {
        CheckNode(node[i], type[0], path + "[" + std::to_string(i) + "]", errors, where);
      }
      return;
    }
    if (!node.IsMap()) {
      errors->push_back(where + ": " + path + ": want a map, got a " + NodeKind(node));
      return;
    }
    const YAML::Node any_key = type["*"];
    for (const auto& kv : node) {
      const std::string key = kv.first.as<std::string>();
      const std::string sub = path.empty() ? key : path + "." + key;
      if (any_key) {
        CheckNode(kv.second, any_key, sub, errors, where);
        continue;
      }
      const YAML::Node field = type[key];
      if (!field) {
        errors->push_back(where + ": " + sub + ": unknown field");
        continue;
      }
      CheckNode(kv.second, field, sub, errors, where);
    }
  }

  static std::string NodeKind(const YAML::Node& n) {
    if (n.IsMap()) return "map";
    if (n.IsSequence()) return "list";
    if (n.IsScalar()) return "scalar";
    return "null";
  }

  YAML::Node root_;
};

}  // namespace hami::chart_test

#endif  // HAMI_TESTS_CHART_K8S_SCHEMA_H_
