// steerd sample: connects to a steerd server, subscribes to a world, spawns one prefab per
// streamed agent and moves it every frame with WorldView.Sample (interpolated, clock-synced).
// Click the ground (a collider on the XZ plane) to send the units this client spawned there.
// World (x, y) maps to Unity (x, 0, y); heading θ (counter-clockwise from +x) to a yaw.
// The click is read with whichever input system the project has active (Player Settings → Active
// Input Handling): the Input System package (ENABLE_INPUT_SYSTEM) or the legacy Input Manager.
using System.Collections.Generic;
using Steerd.Client;
using UnityEngine;
#if ENABLE_INPUT_SYSTEM
using UnityEngine.InputSystem;
#endif

public class AgentSync : MonoBehaviour
{
    public string serverUrl = "ws://127.0.0.1:8080/ws";
    public string world = "demo";
    public string token = "";
    public GameObject agentPrefab;
    public int unitsToSpawn = 5;

    SteerClient client;
    WorldView view;
    readonly List<uint> myUnits = new List<uint>();
    readonly Dictionary<uint, Transform> shown = new Dictionary<uint, Transform>();
    readonly HashSet<uint> seen = new HashSet<uint>();

    async void Start()
    {
        // Called on the main thread: the client handles messages on it (Unity's SynchronizationContext).
        client = await SteerClient.ConnectAsync(serverUrl, new ConnectOptions { Token = string.IsNullOrEmpty(token) ? null : token });
        client.DestinationReached += (agent, w, tick) => Debug.Log("agent " + agent + " arrived");
        client.Disconnected += d => Debug.Log("steerd: disconnected: " + d);
        await client.Subscribe(world);
        view = client.View(world);
        var spawned = await client.Spawn(world, "unity", unitsToSpawn, Shapes.Circle(50, 50, 5));
        myUnits.AddRange(spawned.Agents);
    }

    void Update()
    {
        if (view == null) return;
        Vector2 click;
        if (Clicked(out click) && myUnits.Count > 0)
        {
            RaycastHit hit;
            if (Physics.Raycast(Camera.main.ScreenPointToRay(click), out hit))
                client.MoveTo(world, myUnits, hit.point.x, hit.point.z);
        }
        seen.Clear();
        foreach (var a in view.Sample(SteerClient.NowMs))
        {
            Transform t;
            if (!shown.TryGetValue(a.Id, out t))
            {
                t = Instantiate(agentPrefab).transform;
                shown[a.Id] = t;
            }
            t.position = new Vector3(a.X, 0, a.Y);
            t.rotation = Quaternion.Euler(0, 90 - a.Heading * Mathf.Rad2Deg, 0);
            seen.Add(a.Id);
        }
        var gone = new List<uint>();
        foreach (var id in shown.Keys) if (!seen.Contains(id)) gone.Add(id);
        foreach (var id in gone) { Destroy(shown[id].gameObject); shown.Remove(id); }
    }

    /// <summary>A left click this frame, and where (screen pixels), from the active input system.</summary>
    static bool Clicked(out Vector2 at)
    {
#if ENABLE_INPUT_SYSTEM
        var mouse = Mouse.current;
        if (mouse != null && mouse.leftButton.wasPressedThisFrame) { at = mouse.position.ReadValue(); return true; }
#endif
#if ENABLE_LEGACY_INPUT_MANAGER
        if (Input.GetMouseButtonDown(0)) { at = Input.mousePosition; return true; }
#endif
        at = Vector2.zero;
        return false;
    }

    void OnDestroy()
    {
        if (client != null) client.Close();
    }
}
